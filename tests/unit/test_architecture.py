"""The package's shape, checked: no import circle, the engine never imports Spark, and the
folders of `hoodie_sink/table/` depend on each other in one direction only:

    storage, storage_options, lru_cache, arrow_util, metrics
        <-  format  <-  service_lock  <-  metadata  <-  options  <-  index, catalog  <-  read
        <-  write  <-  services  <-  client

(`service_lock` serialises the runners of one table service, the metadata table's writers too;
`metadata` keeps Hudi's metadata table in step with the data timeline: it writes the format and
is called by the write path and the services; `options` parses the write and read options into
typed configs: it may use the format's value types, and the format never reads an option;
`catalog` registers tables in a Hive metastore: it may read the format and the options, and what
runs after a commit (write, services, client) may call it;
`errors`, outside `table/`, may be used by all of them; `cli/` and `datasource/` reach the engine
through `client`, never `format` or `write`.)  Imports are read from
the source with `ast`, function-level ones included, so a late import cannot hide a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hoodie_sink"

# layer of each room of table/; a module may import its own layer and lower ones
LAYERS = {
    "storage": 0, "storage_options": 0, "lru_cache": 0, "arrow_util": 0, "metrics": 0,
    "format": 1, "service_lock": 2, "metadata": 3, "options": 4, "index": 5, "read": 6, "catalog": 6, "write": 7,
    "services": 8, "dml": 9, "client": 10,
}  # fmt: skip


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, list[tuple[str, int, bool]]]:
    """module -> [(imported module, line, at module level)] for every import in hoodie_sink."""
    out: dict[str, list[tuple[str, int, bool]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        top = {id(n) for n in tree.body}
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(a.name, node.lineno, id(node) in top) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.append((node.module, node.lineno, id(node) in top))
                # `from pkg import module` imports the module too
                found += [(f"{node.module}.{a.name}", node.lineno, id(node) in top) for a in node.names]
        out[name] = found
    return out


IMPORTS = _imports()
MODULES = set(IMPORTS)


def _internal(target: str) -> str | None:
    return target if target in MODULES else None


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["hoodie_sink", "table"] or len(parts) < 3:
        return None
    return LAYERS[parts[2]]


def test_every_room_of_table_has_a_layer():
    rooms = {m.split(".")[2] for m in MODULES if m.startswith("hoodie_sink.table.")}
    assert rooms <= set(LAYERS), f"new folder/module in table/ without a layer: {rooms - set(LAYERS)}"


def test_no_import_circle():
    graph = {m: {t for t, _, _ in IMPORTS[m] if _internal(t) and t != m} for m in MODULES}
    # a package's __init__ is imported with any of its modules: ignore edges into empty inits
    graph = {m: {t for t in ts if (PACKAGE.parent / t.replace(".", "/") / "__init__.py").exists() is False
                 or (PACKAGE.parent / t.replace(".", "/") / "__init__.py").stat().st_size > 0}
             for m, ts in graph.items()}  # fmt: skip
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t) :] + [t]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_engine_never_imports_spark():
    bad = [(m, t, line) for m, imps in IMPORTS.items() if m.startswith("hoodie_sink.table")
           for t, line, _ in imps if t.split(".")[0] in ("pyspark", "py4j")]  # fmt: skip
    assert not bad, f"hoodie_sink.table imports Spark: {bad}"


def test_table_folders_depend_downwards_only():
    bad = []
    for m, imps in IMPORTS.items():
        own = _layer(m)
        if own is None:
            continue
        for t, line, _ in imps:
            if _internal(t) and (theirs := _layer(t)) is not None and theirs > own:
                bad.append(f"{m}:{line} imports {t}")
    assert not bad, "an upward import in hoodie_sink/table (see the layers above):\n" + "\n".join(
        sorted(set(bad))
    )


def test_format_imports_nothing_of_the_write_read_or_service_paths():
    bad = [
        f"{m}:{line} imports {t}"
        for m, imps in IMPORTS.items()
        if m.startswith("hoodie_sink.table.format")
        for t, line, _ in imps
        if t.startswith(
            (
                "hoodie_sink.table.options",
                "hoodie_sink.table.write",
                "hoodie_sink.table.read",
                "hoodie_sink.table.services",
                "hoodie_sink.table.index",
                "hoodie_sink.table.client",
                "hoodie_sink.datasource",
            )
        )
    ]
    assert not bad, "\n".join(bad)


def test_no_late_imports_in_the_engine():
    """A function-level import of our own code in table/ is how a circle hides: not allowed."""
    bad = [
        f"{m}:{line} imports {t} inside a function"
        for m, imps in IMPORTS.items()
        if m.startswith("hoodie_sink.table")
        for t, line, top in imps
        if not top and t.startswith("hoodie_sink")
    ]
    assert not bad, "\n".join(bad)


def test_the_adapters_reach_the_engine_through_its_client():
    """The CLI and the Spark adapter use the engine's entry points (`table/client`: the Table, the
    write client, planned reads, service jobs), never the format model or the write path."""
    bad = [
        f"{m}:{line} imports {t}"
        for m, imps in IMPORTS.items()
        if m.startswith(("hoodie_sink.cli", "hoodie_sink.datasource"))
        for t, line, _ in imps
        if t.startswith(("hoodie_sink.table.format", "hoodie_sink.table.write"))
    ]
    assert not bad, "\n".join(bad)


# -- the index type is decided in index/ only ------------------------------------------------
# An index is a class in hoodie_sink/table/index/ (protocol.py); the write path asks it, never its
# name.  The option's parsing (options/write_config.py) and hoodie.properties' (format/properties.py) read the
# value itself.
INDEX_NAMES = {"bloom", "global_bloom", "bucket", "global_simple", "record_index"}
INDEX_TYPE_READERS = {"hoodie_sink.table.options.write_config", "hoodie_sink.table.format.properties"}


def _index_type_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing an `index_type` attribute or name (other than with None), or comparing with
    an index type's name as a string literal."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
        with_none = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops) and any(
            isinstance(o, ast.Constant) and o.value is None for o in operands
        )
        names_index_type = any(
            (isinstance(o, ast.Attribute) and o.attr == "index_type")
            or (isinstance(o, ast.Name) and o.id == "index_type")
            for o in operands
        )
        literal = any(
            isinstance(o, ast.Constant) and isinstance(o.value, str) and o.value.lower() in INDEX_NAMES
            for o in operands
        )
        if (names_index_type and not with_none) or literal:
            lines.append(node.lineno)
    return lines


def test_index_types_are_compared_in_index_only():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if name.startswith("hoodie_sink.table.index") or name in INDEX_TYPE_READERS:
            continue
        tree = ast.parse(path.read_text(), str(path))
        bad += [f"{name}:{line}" for line in _index_type_comparisons(tree)]
    assert not bad, (
        "the index type compared outside hoodie_sink/table/index/ (ask the Index object instead):\n"
        + "\n".join(bad)
    )


def test_the_index_check_finds_comparisons():
    found = _index_type_comparisons(ast.parse(
        'a = cfg.index_type == "bucket"\nb = index_type != x\nc = t.index_type is None\nd = kind in ("BLOOM",)\n'
    ))  # fmt: skip
    assert found == [1, 2, 4]
