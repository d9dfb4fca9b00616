"""Fetch the jars the tests run from Maven Central into a cache folder: Apache Hudi's Spark bundles
(the interop tier), s3proxy (the S3-compatible server of the object-storage tests) and the Hive
metastore (the catalog tests, tests/support/hive_metastore.py).

Each bundle is one self-contained jar (Hudi and its shaded dependencies), so no dependency
resolution is needed: each jar is downloaded once over HTTPS from the Maven repository
($MAVEN_REPO, default Maven Central), checked against the repository's SHA-1, and kept in
$HOODIE_INTEROP_HOME/jars (default ~/.cache/hoodie_sink/jars).  The Hive metastore is Apache Hive's
binary distribution of the standalone metastore, which Maven Central serves as the artifact's
`bin` tar.gz (its lib/ holds the metastore's own dependencies: DataNucleus, Derby, Thrift, ...),
plus the few Hadoop jars it expects a Hadoop installation to provide (METASTORE_HADOOP), so no POM
walking either.  Standard library only: it runs on a fresh machine before any virtualenv exists.

    python3 tests/interop/fetch_jars.py            # fetch what is missing, print the paths
    python3 tests/interop/fetch_jars.py hive-metastore-4.0.1   # also another metastore version
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path

REPO = os.environ.get("MAVEN_REPO", "https://repo1.maven.org/maven2").rstrip("/")
HOME = Path(os.environ.get("HOODIE_INTEROP_HOME", Path.home() / ".cache" / "hoodie_sink"))

# (group, artifact, version).  Hudi 1.1's Spark 4.0 bundle (hudi-spark4.0-bundle_2.13) is not on
# the Maven repository this machine reaches (every 1.1.x and 1.2.x version answers 404), so Hudi 1.1
# runs on Spark 3.5.1 with its Spark 3.5 bundle: the same table-format code, another Spark binding.
BUNDLES = {
    "0.15.0": ("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "0.15.0"),
    "1.1.1": ("org.apache.hudi", "hudi-spark3.5-bundle_2.12", "1.1.1"),
}
# The S3 server of tests/support/s3_server.py (why this one: docs/design/occ-and-s3.md): its
# executable jar carries its dependencies (Maven classifier "jar-with-dependencies").
S3PROXY = ("org.gaul", "s3proxy", "4.1.0", "jar-with-dependencies")
JARS = {**{v: (*coords, "") for v, coords in BUNDLES.items()}, "s3proxy": S3PROXY}


def jar_path(name: str) -> Path:
    _group, artifact, v, classifier = JARS[name]
    return HOME / "jars" / f"{artifact}-{v}{'-' + classifier if classifier else ''}.jar"


def fetch(name: str) -> Path:
    group, artifact, v, _classifier = JARS[name]
    dest = jar_path(name)
    if not dest.exists():
        _download(group, artifact, v, dest)
    return dest


def _download(group: str, artifact: str, v: str, dest: Path) -> None:
    """Maven artifact file `dest.name` of group:artifact:v into `dest`, checked against its SHA-1."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = f"{REPO}/{group.replace('.', '/')}/{artifact}/{v}/{dest.name}"
    with urllib.request.urlopen(url + ".sha1", timeout=60) as r:
        want = r.read().decode().split()[0].strip()
    tmp = dest.with_suffix(".part")
    sha = hashlib.sha1()  # noqa: S324 - Maven's own checksum, not a security boundary
    with urllib.request.urlopen(url, timeout=300) as r, open(tmp, "wb") as out:
        while chunk := r.read(1 << 20):
            sha.update(chunk)
            out.write(chunk)
    if sha.hexdigest() != want:
        tmp.unlink()
        raise SystemExit(f"{url}: SHA-1 {sha.hexdigest()} does not match the repository's {want}")
    tmp.rename(dest)


# The Hive metastore of the catalog tests (tests/support/hive_metastore.py): version -> (group,
# artifact) of its binary distribution.  3.1.3 is the default: Hive 4 dropped the Thrift calls that
# Hive 2.3 and 3.1 clients make (get_table answers "Invalid method name"), and those clients are
# what Spark 3.5's Hive support and Apache Hudi 0.15's hive sync use; 4.0.1 runs too (on demand).
METASTORES = {
    "3.1.3": ("org.apache.hive", "hive-standalone-metastore"),
    "4.0.1": ("org.apache.hive", "hive-standalone-metastore-server"),
}
METASTORE_VERSION = "3.1.3"
# What the distribution expects from a Hadoop installation ($HADOOP_HOME), found by starting each
# version and serving it a metastore's calls: Hadoop's shaded client (its API and its relocated
# dependencies), the HDFS classes the metastore names (SnapshotException is not in the client),
# and the unshaded libraries Hadoop would have put on the class path.
METASTORE_HADOOP = [
    ("org.apache.hadoop", "hadoop-client-api", "3.3.6"),
    ("org.apache.hadoop", "hadoop-client-runtime", "3.3.6"),
    ("org.apache.hadoop", "hadoop-hdfs", "3.3.6"),
    ("javax.servlet", "javax.servlet-api", "3.1.0"),
    ("org.slf4j", "slf4j-api", "1.7.36"),
    ("commons-collections", "commons-collections", "3.2.2"),
    ("commons-cli", "commons-cli", "1.2"),
    ("commons-logging", "commons-logging", "1.1.3"),
    ("commons-codec", "commons-codec", "1.11"),
    ("commons-io", "commons-io", "2.8.0"),
    ("org.apache.httpcomponents", "httpclient", "4.5.13"),
    ("org.apache.httpcomponents", "httpcore", "4.4.13"),
    ("com.google.code.gson", "gson", "2.9.0"),
]


def metastore_home(version: str = METASTORE_VERSION) -> Path:
    """Where the metastore's distribution is unpacked (its bin/, conf/, lib/, scripts/)."""
    return HOME / "hive-metastore" / f"apache-hive-metastore-{version}-bin"


def metastore_classpath(version: str = METASTORE_VERSION) -> list[Path]:
    """The metastore's jars, its own first, then the Hadoop ones; fetched when missing."""
    home = fetch_metastore(version)
    hadoop = [HOME / "jars" / "hive-metastore-hadoop" / f"{a}-{v}.jar" for _g, a, v in METASTORE_HADOOP]
    return sorted((home / "lib").glob("*.jar")) + hadoop


def fetch_metastore(version: str = METASTORE_VERSION) -> Path:
    """The metastore `version` unpacked, with the Hadoop jars it needs beside it: its home folder."""
    for group, artifact, v in METASTORE_HADOOP:
        dest = HOME / "jars" / "hive-metastore-hadoop" / f"{artifact}-{v}.jar"
        if not dest.exists():
            _download(group, artifact, v, dest)
    home = metastore_home(version)
    stamp = home / ".unpacked"
    if stamp.exists():
        return home
    group, artifact = METASTORES[version]
    archive = HOME / "jars" / f"{artifact}-{version}-bin.tar.gz"
    if not archive.exists():
        _download(group, artifact, version, archive)
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.10/3.11 patch releases since 2023
            tar.extractall(home.parent, filter="data")
        else:
            tar.extractall(home.parent)  # noqa: S202 - Maven Central's SHA-1-checked Apache archive
    if not (home / "lib").is_dir():
        raise SystemExit(f"{archive}: no {home.name}/lib in the archive")
    stamp.touch()
    return home


def main(argv: list[str]) -> int:
    """Fetch every jar and the default metastore, and each `hive-metastore-<version>` named."""
    for name in JARS:
        try:
            print(fetch(name))
        except Exception as e:  # noqa: BLE001 - say exactly what failed
            print(f"could not fetch {name} ({':'.join(JARS[name])}): {e}", file=sys.stderr)
            return 1
    versions = [METASTORE_VERSION] + [a.removeprefix("hive-metastore-") for a in argv]
    for version in dict.fromkeys(versions):
        try:
            print(fetch_metastore(version))
        except Exception as e:  # noqa: BLE001 - say exactly what failed
            print(f"could not fetch the Hive metastore {version}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
