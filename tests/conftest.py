"""Session-wide test set-up, and the storage the tests' tables live on.

`--storage=s3` runs every test's tables on an S3 server started on 127.0.0.1 (s3proxy, see
tests/support/s3_server.py and s3_redirect.py); without it, tests marked `s3` also run a `[s3]`
variant there (the subset CI runs on S3).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.support import s3_redirect, s3_server

# Spark starts its Python workers with $PYSPARK_PYTHON (default: whatever `python3` is on
# PATH); they must run this interpreter, which has hoodie_sink installed.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# Every JVM the tests start (the shared Spark session, subprocess drivers, the standalone cluster,
# Apache Hudi's JVMs) compiles with the client compiler only: test JVMs are short-lived or run small
# jobs, where the server compiler's threads burn more CPU than its code saves. Measured on 2 cores:
# tests/interop/test_java_reads_our_mor.py 206 -> 139 CPU-s, 129 -> 110 s; a session of 40 small
# upserts 103 -> 86 CPU-s. `java` reads JDK_JAVA_OPTIONS (JDK 9+), so children inherit it.
_JIT = "-XX:TieredStopAtLevel=1"
if _JIT not in os.environ.get("JDK_JAVA_OPTIONS", ""):
    os.environ["JDK_JAVA_OPTIONS"] = f"{os.environ.get('JDK_JAVA_OPTIONS', '')} {_JIT}".strip()

_REPO = str(s3_redirect.SITE_DIR.parents[2])
# Every Python process Spark starts imports tests/support/s3site/sitecustomize.py (the S3 redirect);
# set before the shared Spark session starts, whose workers inherit it.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(s3_redirect.SITE_DIR), _REPO, os.environ.get("PYTHONPATH", "")) if p
)

_S3: dict = {}  # registry path, basedir, port, and the server once started


def pytest_addoption(parser):
    parser.addoption(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="where the tests' tables live: local disk, or an S3 server on 127.0.0.1 (s3proxy)",
    )


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin made its factory
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "s3: also runs on the S3 server (a [s3] variant), the subset CI runs there"
    )
    basetemp = config._tmp_path_factory.getbasetemp()
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", basetemp.name):
        if config.getoption("storage") == "s3":
            raise pytest.UsageError(
                f"--storage=s3 makes {basetemp} an S3 bucket: its name must be a valid bucket name"
            )
        return
    registry = basetemp / "s3-redirect.json"
    # The endpoint is written when the server starts (on first use): a port chosen now could be
    # taken by another process by then (tests/support/s3_server.py, `start`).
    s3_redirect.write_registry(
        registry,
        endpoint="",
        access_key=s3_server.ACCESS_KEY,
        secret_key=s3_server.SECRET_KEY,
        basedir=str(basetemp.parent),
    )
    os.environ[s3_redirect.REGISTRY_ENV] = str(registry)
    _S3.update(registry=registry, basetemp=basetemp)
    s3_redirect.install()
    if config.getoption("storage") == "s3":
        _server()
        s3_redirect.register(registry, basetemp)


def _server() -> s3_server.S3Server:
    if "server" not in _S3:
        basetemp = _S3["basetemp"]
        _S3["server"] = s3_server.start(basetemp.parent, state_dir=basetemp)
        s3_redirect.set_endpoint(_S3["registry"], _S3["server"].endpoint)
    return _S3["server"]


def pytest_unconfigure(config):
    server = _S3.pop("server", None)
    if server is not None:
        server.stop()


# With pytest-xdist (`./run.sh test` runs `-n 2 --dist loadgroup`), the tests that share one JVM
# run in one worker: tests/spark (the shared Spark session) and tests/interop (Apache Hudi's
# JVMs, which live for the whole session) are a group each, so each starts its JVMs once; the
# unit tests (no JVM) go to whichever worker is free. Without xdist the marks change nothing.
_JVM_GROUPS = ("spark", "interop", "catalog")


def _jvm_group(nodeid: str) -> str | None:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in _JVM_GROUPS else None


@pytest.hookimpl(tryfirst=True)  # before xdist's worker hook, which reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _jvm_group(item.nodeid)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_xdist_node_collection_finished(node, ids):
    """Stop when xdist did not take the groups. Its worker appends "@<group>" to the node id of each
    marked test by assigning `item._nodeid`, which pytest 9.2 no longer reads (node ids became
    structured): the groups then spread silently over both workers, each starting every JVM, and the
    suite runs minutes longer (pyproject.toml keeps pytest below 9.2 for this)."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    ungrouped = [i for i in ids if _jvm_group(i) and "@" not in i]
    if ungrouped:
        pytest.exit(
            f"--dist loadgroup did not group {len(ungrouped)} tests (e.g. {ungrouped[0]}): this "
            "pytest-xdist cannot group tests under this pytest; install the versions pyproject.toml names",
            returncode=4,
        )


def pytest_generate_tests(metafunc):
    marked = "table_storage" in metafunc.fixturenames and metafunc.definition.get_closest_marker("s3")
    if marked and metafunc.config.getoption("storage") == "local":
        metafunc.parametrize("table_storage", ["local", "s3"], indirect=True)


@pytest.fixture(autouse=True)
def table_storage(request, tmp_path_factory):
    """ "s3" when this test's tables are on the S3 server, else "local"."""
    if request.config.getoption("storage") == "s3":
        yield "s3"
        return
    kind = getattr(request, "param", "local")
    if kind == "local":
        yield kind
        return
    if "registry" not in _S3:
        pytest.fail("the [s3] variant needs a temporary folder whose name is a valid S3 bucket name")
    _server()
    tmp = request.getfixturevalue("tmp_path")
    s3_redirect.register(_S3["registry"], tmp)
    try:
        yield kind
    finally:
        s3_redirect.unregister(_S3["registry"], tmp)


@pytest.fixture
def s3():
    """The S3 server (started on first use), for tests that name S3 paths themselves."""
    if "registry" not in _S3:
        pytest.fail("S3 tests need a temporary folder whose name is a valid S3 bucket name")
    return _server()


@pytest.fixture
def s3_uri(s3):
    """`s3_uri(local_path, scheme="s3a")`: the S3 URI of a folder under the run's temporary folder
    (its bucket), whose objects are that folder's files (tests/support/s3_redirect.py)."""

    def uri(path, scheme: str = "s3a") -> str:
        return f"{scheme}://{os.path.relpath(path, s3.basedir)}"

    return uri


@pytest.fixture
def java_deflate(monkeypatch):
    """GZ HFile blocks deflated as Java deflates them (zlib's level 6, not the sink's ISA-L level 1),
    for the tests that compare our files with Java's byte for byte (table/format/hfile/compression.py)."""
    from hoodie_sink.table.format.hfile import compression

    monkeypatch.setattr(compression, "deflate", compression.JAVA_DEFLATE)
