"""Fetch the jars the tests run from Maven Central into a cache folder: Apache Hudi's Spark bundles
(the interop tier) and s3proxy (the S3-compatible server of the object-storage tests).

Each is one self-contained jar (Hudi and its shaded dependencies), so no dependency
resolution is needed: each jar is downloaded once over HTTPS from the Maven repository
($MAVEN_REPO, default Maven Central), checked against the repository's SHA-1, and kept in
$HOODIE_INTEROP_HOME/jars (default ~/.cache/hoodie_sink/jars).  Standard library only: it runs
on a fresh machine before any virtualenv exists.

    python3 tests/interop/fetch_jars.py            # fetch what is missing, print the jar paths
"""

from __future__ import annotations

import hashlib
import os
import sys
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
    if dest.exists():
        return dest
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
    return dest


def main() -> int:
    for name in JARS:
        try:
            print(fetch(name))
        except Exception as e:  # noqa: BLE001 - say exactly what failed
            print(f"could not fetch {name} ({':'.join(JARS[name])}): {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
