"""One run of the memory comparison (project/memory-compare.sh): a sort as a Spark user runs it.

Usage: python project/memory_compare.py /path/to/spillway.jar on|off rows

Local mode, two tasks, a 2g driver, Spark's default on-heap memory, Spillway's plugin and SQL
extension loaded in both runs; "off" sets spark.spillway.sql.sort.enabled=false, so Spark's own
SortExec sorts. The job sorts `rows` rows of about 200 bytes by a random long and writes them to
the noop sink. Prints one line of key=value: the JVM's peak resident set (VmHWM) and its resident
set after the job (VmRSS), what the sorts spilled (the stage's task metrics, from Spark's REST
API), the library's nativeBytes, nativeCachedBytes and goHeapBytes after the job, and the resident
set again once the library's cache of freed mappings has let go (60 s unused by default).
"""

import json
import sys
import time
import urllib.request

from pyspark.sql import SparkSession


def status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s in /proc/%d/status" % (field, pid))


def main(jar, mode, rows):
    spark = (
        SparkSession.builder.master("local[2]").appName("spillway-memory-compare")
        .config("spark.jars", jar)
        .config("spark.driver.memory", "2g")
        .config("spark.plugins", "spillway.SpillwayPlugin")
        .config("spark.sql.extensions", "spillway.SpillwayExtensions")
        .config("spark.spillway.sql.sort.enabled", "true" if mode == "on" else "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        df = spark.range(0, rows, 1, 2).selectExpr(
            "id", "CAST(rand(3) * 9e18 AS BIGINT) AS k",
            "concat(uuid(), uuid(), uuid(), uuid(), uuid()) AS s")
        df.orderBy("k").write.format("noop").mode("overwrite").save()
        plan = spark._jvm.spillway.NativeStats.read()
        sc = spark.sparkContext
        url = "%s/api/v1/applications/%s/stages" % (sc.uiWebUrl, sc.applicationId)
        stages = json.load(urllib.request.urlopen(url, timeout=30))
        memory_spilled = sum(s.get("memoryBytesSpilled", 0) for s in stages)
        disk_spilled = sum(s.get("diskBytesSpilled", 0) for s in stages)
        rss_after = status(pid, "VmRSS")
        deadline = time.monotonic() + 90  # the cache lets go after 60 s unused (the default)
        while spark._jvm.spillway.NativeStats.read().apply("nativeCachedBytes") > 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        print("memory-compare mode=%s rows=%d peakRss=%d rssAfter=%d memorySpilled=%d diskSpilled=%d "
              "nativeBytes=%d nativeCachedBytes=%d goHeapBytes=%d rssCacheLetGo=%d" % (
                  mode, rows, status(pid, "VmHWM"), rss_after, memory_spilled, disk_spilled,
                  plan.apply("nativeBytes"), plan.apply("nativeCachedBytes"), plan.apply("goHeapBytes"),
                  status(pid, "VmRSS")))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
