"""The repository stands on its own: every document the code cites is in it, and nothing points at
the machine it was written on.

Comments and docs cite the project's own documents as `docs/<path>.md` or
`docs/<path>.md#<section>` (the anchor of a heading in that file, as GitHub makes it).  A citation of
a file that does not exist, or of a heading that does not exist, fails here, as does a mention of an
absolute machine path, of a folder beside the clone, or of the old out-of-tree reference sheets.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [
    "hoodie_sink", "tests", "benchmarks", "docs", ".ci", "run.sh", "README.md", "pyspark_hoodie.py", "pyproject.toml",
]  # fmt: skip
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".ini", ".cfg", ".txt", ".sql", ".yml", ".yaml", ""}
THIS_FILE = Path(__file__).resolve()

CITATION = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)(?:#([\w-]+))?")
# A relative Markdown link between documents, e.g. `[services.md](services.md#rollback)`.
MARKDOWN_LINK = re.compile(r"\]\((?!https?:|#)([\w./-]+?\.md)(?:#([\w-]+))?\)")
# What a clone elsewhere does not have: this machine's folders, a folder beside the clone, and the
# reference sheets that lived outside the repository (cited as "format doc §3.4" and the like).
FORBIDDEN = [
    (re.compile(r"/work/"), "an absolute path of the machine it was written on"),
    (re.compile(r"\.\./shared"), "a folder beside the clone"),
    (re.compile(r"\b(?:format|services|metadata|datasource) doc\b"), "a document outside the repository"),
    (re.compile(r"hudi-(?:format|services|metadata-table)-v6\.md|spark-python-datasource\.md"),
     "a document outside the repository"),
    (re.compile(r"§\s*\d"), "a numbered section of a document outside the repository (cite docs/<doc>.md#<section>)"),
]  # fmt: skip


@cache
def _scanned_files() -> tuple[Path, ...]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in candidates:
            if "__pycache__" in path.parts or path.resolve() == THIS_FILE:
                continue
            if path.suffix in TEXT_SUFFIXES:
                files.append(path)
    return tuple(files)


@cache
def _lines(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text(encoding="utf-8", errors="replace").splitlines())


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKC", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def _anchors(doc: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_code or not match:
            continue
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def _citations() -> list[tuple[str, str, str | None]]:
    """(where, cited document relative to the repository, anchor or None) of every citation."""
    found = []
    for path in _scanned_files():
        for lineno, line in enumerate(_lines(path), 1):
            where = f"{path.relative_to(ROOT)}:{lineno}"
            for match in CITATION.finditer(line):
                found.append((where, match.group(1), match.group(2)))
            if path.suffix == ".md":
                for match in MARKDOWN_LINK.finditer(line):
                    target = (path.parent / match.group(1)).resolve()
                    doc = target.relative_to(ROOT).as_posix() if target.is_relative_to(ROOT) else str(target)
                    found.append((where, doc, match.group(2)))
    return found


def test_the_scan_sees_the_code_and_its_citations() -> None:
    """Guards the guard: the files are found and the comments' citations are recognised."""
    files = {p.relative_to(ROOT).as_posix() for p in _scanned_files()}
    assert {"run.sh", "README.md", "hoodie_sink/table/format/log_format.py"} <= files
    cited = {doc for _, doc, _ in _citations()}
    assert {"docs/hudi/format.md", "docs/hudi/services.md"} <= cited


def test_cited_documents_and_sections_exist() -> None:
    missing = []
    for where, doc, anchor in _citations():
        path = ROOT / doc
        if not path.is_file():
            missing.append(f"{where}: {doc} does not exist")
        elif anchor and anchor not in _anchors(path):
            missing.append(f"{where}: {doc} has no heading whose anchor is #{anchor}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("pattern,what", FORBIDDEN, ids=[p.pattern for p, _ in FORBIDDEN])
def test_nothing_points_outside_the_repository(pattern: re.Pattern[str], what: str) -> None:
    hits = []
    for path in _scanned_files():
        for lineno, line in enumerate(_lines(path), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not hits, f"{what}:\n" + "\n".join(hits)


def test_slug_matches_github() -> None:
    assert _slug("Commit protocol and visibility") == "commit-protocol-and-visibility"
    assert _slug("hoodie.properties") == "hoodieproperties"
    assert _slug("Apache Hudi 1.x and table version 6") == "apache-hudi-1x-and-table-version-6"
