#!/usr/bin/env bash
# The project's two entry points; each sets itself up first (idempotent):
#   ./run.sh demo   a local Spark job writing a Hudi table into ./demo_table, with a summary
#   ./run.sh test   the whole test suite
# Set-up: Java 17 (apt-get, when missing), a virtualenv in .venv, the package and test deps; for
# the tests also the interop tier (Apache Hudi's Spark bundles, see ensure_interop).
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

ensure_java() {
  local major
  major=$(java_major)
  if [ "${major:-0}" -lt 17 ] 2>/dev/null; then
    echo "[setup] Java 17 not found (found: ${major:-none}); installing openjdk-17-jre-headless" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    local j17
    j17=$(ls -d /usr/lib/jvm/java-17-openjdk-*/ 2>/dev/null | head -1)
    [ -n "$j17" ] && export JAVA_HOME="${j17%/}" && export PATH="$JAVA_HOME/bin:$PATH"
  fi
}

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
      echo "[setup] python venv module missing; installing python3-venv" >&2
      rm -rf "$VENV"
      as_root apt-get update -qq
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv "$VENV"
    fi
  fi
  local stamp="$VENV/.installed" want
  want=$(cat pyproject.toml | sha1sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[setup] installing hoodie_sink and its test dependencies into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[test]' --config-settings editable_mode=compat
    echo "$want" > "$stamp"
  fi
}

# The interop tier (tests/interop/) runs Apache Hudi itself: its Spark bundles need a Spark of
# their own (pyspark 3.5.1 in a separate virtualenv) and the bundle jars from Maven Central, all
# kept in $HOODIE_INTEROP_HOME (default ~/.cache/hoodie_sink). HOODIE_INTEROP=0 skips the tier.
INTEROP_HOME=${HOODIE_INTEROP_HOME:-$HOME/.cache/hoodie_sink}

ensure_interop() {
  [ "${HOODIE_INTEROP:-1}" = "0" ] && return 0
  local venv="$INTEROP_HOME/venv-spark-3.5.1"
  if [ ! -f "$venv/.installed" ]; then
    echo "[setup] interop tier: pyspark 3.5.1 into $venv (Apache Hudi's bundles run on Spark 3.5)" >&2
    rm -rf "$venv"
    mkdir -p "$INTEROP_HOME"
    if "$PY" -m venv "$venv" && "$venv/bin/python" -m pip install -q pyspark==3.5.1; then
      touch "$venv/.installed"
    else
      echo "[setup] interop tier: could not install pyspark 3.5.1; its tests will fail and say why" >&2
    fi
  fi
  HOODIE_INTEROP_HOME="$INTEROP_HOME" "$PY" tests/interop/fetch_jars.py >/dev/null \
    || echo "[setup] interop tier: could not fetch the Hudi bundles; its tests will fail and say why" >&2
}

cmd=${1:-}
shift || true
case "$cmd" in
  demo)
    ensure_java; ensure_venv
    export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
    exec "$VENV/bin/python" -m hoodie_sink.demo "$@" ;;
  test)
    ensure_java; ensure_venv; ensure_interop
    export HOODIE_INTEROP_HOME="$INTEROP_HOME"
    export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
    exec "$VENV/bin/python" -m pytest "$@" ;;
  *)
    echo "usage: ./run.sh demo | ./run.sh test [pytest args]" >&2; exit 2 ;;
esac
