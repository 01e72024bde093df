"""Spillway's native sort in a PySpark job, turned on by configuration alone.

Usage: python examples/pyspark_sql_sort.py /path/to/spillway_2.13-<version>.jar

Two confs do it: spark.plugins loads the native library on every executor, spark.sql.extensions
puts Spillway's sort in place of Spark's wherever the sort keys allow. The example runs an ORDER BY
with a small native memory budget (so that it spills), shows that the plan runs SpillwaySort, and
checks the result against Spark's own sort (the same query with spark.spillway.sql.sort.enabled
set to false). Exits 1 if either check fails.
"""

import sys

from pyspark.sql import SparkSession


def main(jar: str) -> int:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("spillway-pyspark-sql-sort")
        .config("spark.jars", jar)
        .config("spark.plugins", "spillway.SpillwayPlugin")
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

        native = query()
        rows = native.collect()
        # After the run, the adaptive plan is final and shows every sort as it ran.
        plan = native._jdf.queryExecution().executedPlan().toString()
        print(plan)
        if "SpillwaySort" not in plan:
            print("FAIL: the plan has no SpillwaySort; is spark.sql.extensions set and the jar on the classpath?")
            return 1

        spark.conf.set("spark.spillway.sql.sort.enabled", "false")
        expected = query().collect()
        if rows != expected:
            print("FAIL: Spillway's sort and Spark's returned different rows")
            return 1
        print(f"OK: {len(rows)} rows ordered by SpillwaySort, the same as Spark's sort")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
