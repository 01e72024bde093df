#!/usr/bin/env bash
# Runs examples/pyspark_sql_sort.py (Spillway's native sort in a PySpark job, by configuration
# alone) on every Spark line pyspark ships (project/spark-lines: the lines whose Scala version is
# the one that pyspark's distribution carries: 3.5 with 2.12, 4.0 and 4.1 with 2.13), each in a venv
# of that pyspark (build/pyspark-<version>, installed on first use). On each, the jar comes the way
# the README says to get it: `spark-submit --packages <group>:<artifact>:<version>` from the local
# Maven repository of `make publish-local` (`--repositories file://.../build/maven`, with an Ivy
# cache of its own, removed afterwards, so that nothing resolved before is reused); on the primary
# line also by path (`python examples/pyspark_sql_sort.py <jar>`). Exits non-zero if any run fails.
#
# Environment: PYTHON (default python3). Needs `make publish-local` first (make pyspark-example runs it).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=project/lines.sh
source "$repo_root/project/lines.sh"
# shellcheck source=project/pyspark-venv.sh
source "$repo_root/project/pyspark-venv.sh"

die() { echo "pyspark-example: $*" >&2; exit 1; }
log() { echo "pyspark-example: $*"; }

repository="$repo_root/build/maven"
[[ -d "$repository" ]] || die "no local Maven repository in $repository: run \`make publish-local\` first"
version="$(spillway_version)"
group=io.github.spillway

# The driver's scratch space and the Ivy cache in build/, removed afterwards.
scratch="$(mktemp -d "$repo_root/build/pyspark-example.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

ran=()
for spark_version in $(for k in $(line_keys); do line_field "$k" 3; done | uniq); do
  ensure_pyspark_venv pyspark-example "$spark_version" || die "no pyspark $spark_version venv"
  key="${spark_version%.*}_$pyspark_scala"
  [[ -n "$(line_field "$key" 3)" ]] || die "pyspark $spark_version ships Scala $pyspark_scala: no line $key in project/spark-lines"
  artifact="$(line_artifact "$key")"
  [[ -d "$repository/${group//./\/}/$artifact/$version" ]] || die "$artifact $version is not in $repository: run \`make publish-local\`"
  export PYSPARK_PYTHON="$venv/bin/python" PYSPARK_DRIVER_PYTHON="$venv/bin/python"
  started=$(date +%s)
  log "Spark $spark_version: spark-submit --packages $group:$artifact:$version --repositories file://$repository"
  rm -rf "$scratch/ivy" "$scratch/local"; mkdir -p "$scratch/local"
  SPARK_LOCAL_DIRS="$scratch/local" timeout 600 "$SPARK_HOME/bin/spark-submit" --master 'local[2]' \
    --packages "$group:$artifact:$version" --repositories "file://$repository" \
    --conf "spark.jars.ivy=$scratch/ivy" \
    --driver-java-options "-Djava.io.tmpdir=$scratch -Dlog4j2.configurationFile=$repo_root/scala-shim/conf/log4j2.properties" \
    examples/pyspark_sql_sort.py || die "Spark $spark_version with --packages $artifact: the example failed"
  if [[ "$key" == "$(primary_line_key)" ]]; then
    log "Spark $spark_version: python examples/pyspark_sql_sort.py $(line_jar "$key")"
    SPARK_LOCAL_DIRS="$scratch/local" timeout 600 "$venv/bin/python" examples/pyspark_sql_sort.py "$(line_jar "$key")" ||
      die "Spark $spark_version with the jar by path: the example failed"
  fi
  ran+=("$key ($(( $(date +%s) - started )) s)")
done
log "passed on ${ran[*]}"
