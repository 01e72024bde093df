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

jar="$(ls target/scala-2.13/spillway_2.13-*.jar 2>/dev/null | head -1 || true)"
[[ -f "$jar" ]] || die "no jar in target/scala-2.13: run \`make jar\` first"

# shellcheck source=project/pyspark-venv.sh
source "$repo_root/project/pyspark-venv.sh"
ensure_pyspark_venv pyspark-example || die "no pyspark venv"

# The driver's scratch space in build/, removed afterwards.
scratch="$(mktemp -d "$repo_root/build/pyspark-example.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
SPARK_LOCAL_DIRS="$scratch" timeout 600 "$venv/bin/python" examples/pyspark_sql_sort.py "$repo_root/$jar"
