#!/usr/bin/env bash
# Apache Spark's own SQL suites with Spillway's SQL extension on, against the same suites with it
# off: every test that passes off must pass on (`make spark-suites`; docs/development.md, "Spark's own suites").
#
# The suites come from Spark's test jars (spark-sql, spark-catalyst and spark-core, classifier
# `tests`), which the sbt project `sparkSuites` (build.sbt) resolves with the test libraries
# Spark's build gives them; it writes their classpath and Spark's Java 17 options. Each run is one
# JVM with ScalaTest's Runner (through spillway.suites.RunSuites), with the system properties
# Spark's own build sets for its tests (spark.testing, no UI, an exception on a task memory leak).
# SparkConf reads -Dspark.* system properties, so the "on" run's
#   -Dspark.sql.extensions=spillway.SpillwayExtensions -Dspark.spillway.sort.memoryBudget=<budget>
# reach every session the suites build: every sort the rule can take runs natively and spills
# past a tiny budget. No plugin: the library loads on the first native sort, from the product's
# classes (the bundled library). The "off" run must not load it at all.
#
# Each run writes ScalaTest's JUnit XML (one file per suite) under build/spark-suites/<mode>/junit;
# the comparison lists, per test, those that pass off and fail or do not run on, with the failure
# message on, and the totals. Exits 1 if there is any, except the known differences of
# project/spark-suites-known (each with its reason), which are listed apart.
#
# Environment:
#   SPARK_SUITES   the suites, space-separated (default: the list below)
#   SORT_BUDGET    spark.spillway.sort.memoryBudget of the "on" run (default 1k: the suites' tables
#                  are small, 64k let no sort of JoinSuite spill)
#   MODES          the runs to make, of "off on" (default both); compares what is under build/
#   SEQUENTIAL=1   one run after the other (default: both at once, one JVM per core)
#   SUITES_XMX     heap of each run (default 4g, as Spark's build)
#
# Usage: project/spark-suites.sh   (after `make lib`; make spark-suites does both)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# SortSuite last: the longest (255 tests over random data of every sortable type; the SortExec
# plans it builds are prepared with the session's rules, so they run natively with the extension
# on, checked against Spark's reference sort).
suites=${SPARK_SUITES:-"
  org.apache.spark.sql.JoinSuite
  org.apache.spark.sql.execution.PlannerSuite
  org.apache.spark.sql.DataFrameWindowFunctionsSuite
  org.apache.spark.sql.DataFrameWindowFramesSuite
  org.apache.spark.sql.execution.SortSuite
"}
budget=${SORT_BUDGET:-1k}
modes=${MODES:-"off on"}
out="$repo_root/build/spark-suites"

project/sbt sparkSuites/writeSparkSuitesClasspath
classpath="$(cat scala-shim/spark-suites/target/spark-suites-classpath)"
mapfile -t java17 < scala-shim/spark-suites/target/spark-suites-jvm-options

java_cmd="java"
[[ -n "${JAVA_HOME:-}" ]] && java_cmd="$JAVA_HOME/bin/java"

run() { # run MODE: one JVM, every suite; its reports under $out/MODE
  local mode=$1 dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/junit" "$dir/work/tmp" "$dir/native-stats"
  local props=(
    -ea "-Xmx${SUITES_XMX:-4g}" -Xss4m -XX:ReservedCodeCacheSize=512m
    "${java17[@]}"
    -Dspark.testing=1 -Dspark.ui.enabled=false -Dspark.ui.showConsoleProgress=false
    -Dspark.unsafe.exceptionOnMemoryLeak=true -Dspark.memory.debugFill=true
    -Dspark.port.maxRetries=100 -Dspark.master.rest.enabled=false
    -Dspark.hadoop.hadoop.security.key.provider.path=test:///
    -Dderby.system.durability=test -Dsun.io.serialization.extendedDebugInfo=false
    "-Djava.io.tmpdir=$dir/work/tmp"
    "-Dlog4j2.configurationFile=$repo_root/scala-shim/conf/log4j2.properties"
  )
  if [[ $mode == on ]]; then
    props+=(-Dspark.sql.extensions=spillway.SpillwayExtensions "-Dspark.spillway.sort.memoryBudget=$budget")
  fi
  # One JVM per suite: an error that aborts the run (an ExceptionInInitializerError does) loses
  # that suite's report only. In a working dir of its own: some suites write relative paths
  # (spark-warehouse, metastore_db). spark.test.home/SPARK_HOME: Spark's test utilities read it in
  # static initializers (the Python UDF helpers: without it their first use aborts the run; with
  # no pyspark there, their tests cancel).
  local start=$SECONDS s
  echo "spark-suites: run $mode ($(wc -w <<<"$suites") suites), log in $dir/run.log" >&2
  for s in $suites; do
    (cd "$dir/work" && SPARK_TESTING=1 SPARK_HOME="$dir/work" "$java_cmd" "${props[@]}" \
      "-Dspark.test.home=$dir/work" "-Dspillway.suites.statsFile=$dir/native-stats/$s" -cp "$classpath" \
      spillway.suites.RunSuites -oW -u "$dir/junit" -s "$s") >>"$dir/run.log" 2>&1
    echo "spark-suites: run $mode: $s done at $((SECONDS - start)) s" >&2
  done
  echo "$((SECONDS - start))" >"$dir/seconds"
  echo "spark-suites: run $mode took $((SECONDS - start)) s" >&2
}

if [[ ${SEQUENTIAL:-} == 1 ]]; then
  for m in $modes; do run "$m"; done
else
  pids=()
  for m in $modes; do run "$m" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
fi

python3 project/spark_suites_compare.py "$out/off" "$out/on" project/spark-suites-known
