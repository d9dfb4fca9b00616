#!/usr/bin/env bash
# The project's two entry points; each sets itself up first (idempotent, and says what it does):
#   ./run.sh demo   a local Spark job writing a Hudi table into ./demo_table, with a summary
#                   (--kafka: a Debezium topic on a local Kafka broker into ./demo_kafka_table)
#   ./run.sh test   the whole test suite
# Set-up: Java 17 (apt-get, when missing), a virtualenv in .venv with the package (what the demo
# needs); for the tests also the test extras (pyproject.toml) and the interop tier (Apache Hudi's
# Spark bundles, see ensure_interop; Kafka's broker and Spark's Kafka source, see ensure_kafka).
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
VENV=.venv

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

say() { echo "[setup] $*" >&2; }

ensure_java() {
  local major
  major=$(java_major)
  if [ "${major:-0}" -lt 17 ] 2>/dev/null; then
    say "Java 17 not found (found: ${major:-none}); installing openjdk-17-jre-headless with apt-get"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    local j17
    j17=$(ls -d /usr/lib/jvm/java-17-openjdk-*/ 2>/dev/null | head -1)
    [ -n "$j17" ] && export JAVA_HOME="${j17%/}" && export PATH="$JAVA_HOME/bin:$PATH"
    say "Java: $(java_major) installed"
  else
    say "Java $major: found ($(command -v java))"
  fi
}

# $1: "" for the package and its dependencies (what the demo needs: about 0.9 GB, pyspark most of
# it), "test" for the test extras too (hudi-rs, deltalake, mypy, ruff, ...: about 0.4 GB more).
# The stamp holds pyproject.toml's hash and what was installed; the test install serves the demo.
ensure_venv() {
  local extras=${1:-} spec=. what="hoodie_sink and its dependencies (pyspark, pyarrow, ...)"
  if [ -n "$extras" ]; then
    spec=".[$extras]"
    what="hoodie_sink, its dependencies and its $extras extras (pyproject.toml)"
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating the virtualenv $VENV ($("$PY" --version 2>&1))"
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
      say "python venv module missing; installing python3-venv with apt-get"
      rm -rf "$VENV"
      as_root apt-get update -qq
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PY" -m venv "$VENV"
    fi
  fi
  local stamp="$VENV/.installed" want have=""
  want=$(sha1sum < pyproject.toml | cut -d' ' -f1)
  [ -f "$stamp" ] && have=$(cat "$stamp")
  if [ "$have" = "$want ${extras}" ] || [ "$have" = "$want test" ]; then
    local got="the package"
    [ "${have#* }" = test ] && got="the package and the test extras"
    say "virtualenv $VENV: up to date ($got)"
    return 0
  fi
  say "installing $what into $VENV with pip (a few minutes the first time)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$spec" --config-settings editable_mode=compat
  echo "$want ${extras}" > "$stamp"
  say "virtualenv $VENV: ready ($(du -sh "$VENV" 2>/dev/null | cut -f1))"
}

# The interop tier (tests/interop/) runs Apache Hudi itself: its Spark bundles need a Spark of
# their own (pyspark 3.5.1 in a separate virtualenv) and the bundle jars from Maven Central, all
# kept in $HOODIE_INTEROP_HOME (default ~/.cache/hoodie_sink). The catalog tests' Hive metastore
# (Apache Hive's standalone metastore 3.1.3 and the Hadoop jars it needs, ~110 MB, see
# tests/support/hive_metastore.py) is fetched with them. HOODIE_INTEROP=0 skips the tier and them.
INTEROP_HOME=${HOODIE_INTEROP_HOME:-$HOME/.cache/hoodie_sink}

ensure_interop() {
  [ "${HOODIE_INTEROP:-1}" = "0" ] && return 0
  local venv="$INTEROP_HOME/venv-spark-3.5.1"
  if [ ! -f "$venv/.installed" ]; then
    say "interop tier: pyspark 3.5.1 into $venv (Apache Hudi's bundles run on Spark 3.5)"
    rm -rf "$venv"
    mkdir -p "$INTEROP_HOME"
    if "$PY" -m venv "$venv" && "$venv/bin/python" -m pip install -q pyspark==3.5.1; then
      touch "$venv/.installed"
    else
      say "interop tier: could not install pyspark 3.5.1; its tests will fail and say why"
    fi
  fi
  say "interop tier: Apache Hudi's bundle jars and the Hive metastore in $INTEROP_HOME (fetched from Maven Central when missing)"
  HOODIE_INTEROP_HOME="$INTEROP_HOME" "$PY" tests/interop/fetch_jars.py >/dev/null \
    || say "interop tier: could not fetch the Hudi bundles or the Hive metastore; their tests will fail and say why"
}

# The Kafka tests (tests/spark/test_kafka_source.py): Apache Kafka's broker and Spark's Kafka source
# with their dependencies, resolved from Maven Central by Ivy (pyspark's) into $INTEROP_HOME
# (tests/support/kafka_setup.py). After ensure_venv: it runs with the virtualenv's pyspark.
ensure_kafka() {
  [ "${HOODIE_INTEROP:-1}" = "0" ] && return 0
  say "Kafka tests: Apache Kafka's broker and Spark's Kafka source in $INTEROP_HOME (fetched from Maven Central when missing)"
  HOODIE_INTEROP_HOME="$INTEROP_HOME" "$VENV/bin/python" tests/support/kafka_setup.py >/dev/null \
    || say "Kafka tests: could not fetch Kafka or Spark's Kafka source; those tests will fail and say why"
}

cmd=${1:-}
shift || true
case "$cmd" in
  demo)
    ensure_java; ensure_venv ""
    case " $* " in *" --kafka "*)
      # the Kafka demo: its broker, Spark's Kafka source and the producer's client (confluent-kafka)
      "$VENV/bin/python" -c "import confluent_kafka" 2>/dev/null || {
        say "Kafka demo: installing confluent-kafka (the demo's producer) into $VENV"
        "$VENV/bin/python" -m pip install -q "confluent-kafka>=2.6"; }
      HOODIE_INTEROP= ensure_kafka
      export HOODIE_INTEROP_HOME="$INTEROP_HOME" ;;
    esac
    export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
    exec "$VENV/bin/python" -m hoodie_sink.demo "$@" ;;
  test)
    ensure_java; ensure_venv test; ensure_interop; ensure_kafka
    export HOODIE_INTEROP_HOME="$INTEROP_HOME"
    export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
    # two pytest-xdist workers: the unit tests (no JVM) run beside the Spark and interop groups,
    # which wait on their JVMs much of the time (tests/conftest.py groups them); HOODIE_TEST_WORKERS=0
    # runs everything in this process
    exec "$VENV/bin/python" -m pytest -n "${HOODIE_TEST_WORKERS:-2}" --dist loadgroup "$@" ;;
  *)
    echo "usage: ./run.sh demo | ./run.sh test [pytest args]" >&2; exit 2 ;;
esac
