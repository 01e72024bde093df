"""Spillway's native sort in a PySpark job, turned on by configuration alone.

Usage: python examples/pyspark_sql_sort.py /path/to/spillway-spark<line>_<scala>-<version>.jar
   or: spark-submit --packages io.github.spillway:spillway-spark<line>_<scala>:<version> examples/pyspark_sql_sort.py

Two confs do it: spark.plugins loads the native library on every executor, spark.sql.extensions
puts Spillway's sort in place of Spark's wherever the sort keys allow. The example runs an ORDER BY
with a small native memory budget (so that it spills), shows that the plan runs SpillwaySort, and
checks the result against Spark's own sort (the same query with spark.spillway.sql.sort.enabled
set to false), and that the sort spilled through Spillway and left nothing behind (the library's
counters, which count for the whole JVM: in local mode the driver is the executor). Then it lists
the sorts left to Spark's sort (keys the native sort cannot encode, an array here) the way that
works on every Spark line, SpillwaySortRule.fallbacksOf, and on Spark 4.0 and later also through
explain with Spillway's explain provider. Exits 1 if a check fails.
"""

import contextlib
import io
import sys
from typing import Optional

from pyspark.sql import SparkSession


def main(jar: Optional[str]) -> int:
    builder = SparkSession.builder.master("local[2]").appName("spillway-pyspark-sql-sort")
    if jar:  # else spark-submit --packages (or --jars) put it on the classpath
        builder = builder.config("spark.jars", jar)
    spark = (
        builder.config("spark.plugins", "spillway.SpillwayPlugin")
        .config("spark.sql.extensions", "spillway.SpillwayExtensions")
        .config("spark.spillway.sort.memoryBudget", "1m")  # small, so that the sort spills
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        def query():
            df = spark.range(0, 200000, 1, 4).selectExpr(
                "id", "CAST(rand(7) * 1000 AS INT) AS k", "sha2(CAST(id AS STRING), 256) AS s")
            return df.orderBy(df.k.asc_nulls_last(), df.s.desc())

        def counters():
            stats = spark._jvm.spillway.NativeStats.read()
            return {name: stats.apply(name) for name in ("spillFiles", "bytesSpilled", "livePlans", "bytesInUse")}

        before = counters()
        native = query()
        rows = native.collect()
        after = counters()
        # After the run, the adaptive plan is final and shows every sort as it ran.
        plan = native._jdf.queryExecution().executedPlan().toString()
        print(plan)
        if "SpillwaySort" not in plan:
            print("FAIL: the plan has no SpillwaySort; is spark.sql.extensions set and the jar on the classpath?")
            return 1

        files = after["spillFiles"] - before["spillFiles"]
        spilled = after["bytesSpilled"] - before["bytesSpilled"]
        if files == 0 or spilled == 0:
            print(f"FAIL: the sort did not spill through Spillway ({after})")
            return 1
        if after["livePlans"] != 0 or after["bytesInUse"] != 0:
            print(f"FAIL: plans or spill files left after the query ({after})")
            return 1
        print(f"spilled through Spillway: {files} files, {spilled} bytes; none left")

        spark.conf.set("spark.spillway.sql.sort.enabled", "false")
        expected = query().collect()
        if rows != expected:
            print("FAIL: Spillway's sort and Spark's returned different rows")
            return 1
        print(f"OK: {len(rows)} rows ordered by SpillwaySort, the same as Spark's sort")
        spark.conf.unset("spark.spillway.sql.sort.enabled")
        return check_fallbacks(spark, native)
    finally:
        spark.stop()


def check_fallbacks(spark: SparkSession, native) -> int:
    """The sorts left to Spark's sort: none in the native query, one for an array key."""
    def fallbacks(df):
        return list(spark._jvm.spillway.sql.SpillwaySortRule.fallbacksOf(df._jdf))

    if fallbacks(native):
        print(f"FAIL: fallbacks listed for a query whose sorts all ran natively: {fallbacks(native)}")
        return 1
    arrays = spark.range(0, 1000, 1, 2).selectExpr("id", "array(CAST(id % 7 AS INT), CAST(id AS INT)) AS arr").orderBy("arr")
    arrays.collect()
    listed = fallbacks(arrays)
    if len(listed) != 1 or "runs as Spark's sort" not in listed[0] or "array<int>" not in listed[0]:
        print(f"FAIL: the array-keyed sort is not listed as left to Spark's sort: {listed}")
        return 1
    print(f"left to Spark's sort: {listed[0]}")
    if int(spark.version.split(".")[0]) >= 4:  # explain providers came with Spark 4.0
        spark.conf.set("spark.sql.extendedExplainProviders", "spillway.sql.SpillwayExplainInfo")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            arrays.explain()
        spark.conf.unset("spark.sql.extendedExplainProviders")
        if f"== Extended Information (Spillway) ==\n{listed[0]}" not in out.getvalue():
            print(f"FAIL: explain does not list the sort left to Spark's sort:\n{out.getvalue()}")
            return 1
        print("explain lists it under == Extended Information (Spillway) ==")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2:
        print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1] if len(sys.argv) == 2 else None))
