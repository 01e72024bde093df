#!/usr/bin/env bash
# Runs examples/pyspark_sql_sort.py (Spillway's native sort in a PySpark job, by configuration
# alone) with the jar, in the pyspark venv the cluster test uses (build/pyspark-venv, installed on
# first use: pyspark==<the Spark version of build.sbt>). Exits with the example's status.
#
# Environment: PYTHON (default python3). Needs the jar: run `make jar` first.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

die() { echo "pyspark-example: $*" >&2; exit 1; }

spark_version="$(sed -n 's/^val sparkVersion = "\(.*\)"/\1/p' build.sbt)"
[[ -n "$spark_version" ]] || die "no sparkVersion in build.sbt"
jar="$(ls target/scala-2.13/spillway_2.13-*.jar 2>/dev/null | head -1 || true)"
[[ -f "$jar" ]] || die "no jar in target/scala-2.13: run \`make jar\` first"

venv="$repo_root/build/pyspark-venv"
python="${PYTHON:-python3}"
if ! "$venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$spark_version')" 2>/dev/null; then
  command -v "$python" >/dev/null || die "$python not found (needed to install pyspark)"
  echo "pyspark-example: installing pyspark==$spark_version into $venv (~450 MB)"
  rm -rf "$venv"
  "$python" -m venv "$venv" || die "could not create a venv (on Debian/Ubuntu: apt-get install python3-venv)"
  timeout 900 "$venv/bin/pip" install --no-input --disable-pip-version-check -q "pyspark==$spark_version"
fi

# The driver's scratch space in build/, removed afterwards.
scratch="$(mktemp -d "$repo_root/build/pyspark-example.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
SPARK_LOCAL_DIRS="$scratch" timeout 600 "$venv/bin/python" examples/pyspark_sql_sort.py "$repo_root/$jar"
