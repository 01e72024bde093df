"""One run of the memory comparison (project/memory-compare.sh): a sort as a Spark user runs it.

Usage: python project/memory_compare.py /path/to/spillway.jar on|off rows onheap|offheap

Local mode, two tasks, a 2g driver, Spillway's defaults, Spillway's plugin and SQL extension
loaded in both runs; "off" sets spark.spillway.sql.sort.enabled=false, so Spark's own SortExec
sorts. "onheap" is Spark's default memory mode; "offheap" gives Spark 1g of off-heap execution
memory (spark.memory.offHeap.enabled), which both sorts then use. The job sorts `rows` rows of
about 200 bytes by a random long and writes them to the noop sink. Prints one line of key=value:
the JVM's resident set (VmRSS) before the job (after the same job once with Spark's sort; the 2g
heap is touched whole at start, -Xms2g -XX:+AlwaysPreTouch, so that its growth is not counted),
its peak (VmHWM), its resident set right after the job and SETTLE_SECONDS after it, what the
sorts spilled (the stage's task metrics, from Spark's REST API), and the library's nativeBytes,
nativeCachedBytes and goHeapBytes after the job. MEMORY_COMPARE_CONF adds confs to both runs
("key=value key=value", e.g. spark.spillway.sort.memoryCacheIdle=60s to keep freed memory).
"""

import json
import os
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


# "A few seconds after the job": what the process still holds once the job's threads are done.
SETTLE_SECONDS = 3


def main(jar, mode, rows, memory):
    builder = (
        SparkSession.builder.master("local[2]").appName("spillway-memory-compare")
        .config("spark.jars", jar)
        .config("spark.driver.memory", "2g")
        # The heap touched whole at start: its growth during a job, which G1 never gives back,
        # is then no part of what a job leaves above the resident set before it.
        .config("spark.driver.extraJavaOptions", "-Xms2g -XX:+AlwaysPreTouch")
        .config("spark.plugins", "spillway.SpillwayPlugin")
        .config("spark.sql.extensions", "spillway.SpillwayExtensions")
        .config("spark.spillway.sql.sort.enabled", "true" if mode == "on" else "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for kv in os.environ.get("MEMORY_COMPARE_CONF", "").split():
        builder = builder.config(*kv.split("=", 1))
    if memory == "offheap":
        builder = builder.config("spark.memory.offHeap.enabled", "true").config("spark.memory.offHeap.size", "1g")
    spark = builder.getOrCreate()
    try:
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        df = spark.range(0, rows, 1, 2).selectExpr(
            "id", "CAST(rand(3) * 9e18 AS BIGINT) AS k",
            "concat(uuid(), uuid(), uuid(), uuid(), uuid()) AS s")
        # The same job once before, with Spark's sort: the JVM's heap and Spark's own buffers grow
        # to what the job needs and stay, whichever sort runs; what the measured job leaves above
        # that is what outlives its sort, the native sort's included.
        spark.conf.set("spark.spillway.sql.sort.enabled", "false")
        df.orderBy("k").write.format("noop").mode("overwrite").save()
        spark.conf.set("spark.spillway.sql.sort.enabled", "true" if mode == "on" else "false")
        time.sleep(SETTLE_SECONDS)
        rss_before = status(pid, "VmRSS")
        df.orderBy("k").write.format("noop").mode("overwrite").save()
        plan = spark._jvm.spillway.NativeStats.read()
        sc = spark.sparkContext
        url = "%s/api/v1/applications/%s/stages" % (sc.uiWebUrl, sc.applicationId)
        stages = json.load(urllib.request.urlopen(url, timeout=30))
        memory_spilled = sum(s.get("memoryBytesSpilled", 0) for s in stages)
        disk_spilled = sum(s.get("diskBytesSpilled", 0) for s in stages)
        rss_after = status(pid, "VmRSS")
        time.sleep(SETTLE_SECONDS)
        print("memory-compare mode=%s memory=%s rows=%d rssBefore=%d peakRss=%d rssAfter=%d rssSettled=%d "
              "memorySpilled=%d diskSpilled=%d nativeBytes=%d nativeCachedBytes=%d goHeapBytes=%d" % (
                  mode, memory, rows, rss_before, status(pid, "VmHWM"), rss_after, status(pid, "VmRSS"),
                  memory_spilled, disk_spilled, plan.apply("nativeBytes"), plan.apply("nativeCachedBytes"),
                  plan.apply("goHeapBytes")))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
