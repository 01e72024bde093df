"""The Spark application of the UI test (test/ui/run.sh): PySpark, local mode, Spillway on.

Once its SparkContext is up (Spark has copied the application's jar into one of its local dirs),
writes OUT_JSON.started and waits for the file OUT_JSON.filled: the test fills the tmpfs then.
Runs two SQL queries, each under a job description the test finds it by: a sort within
partitions that the native sort runs and spills (a small sort budget), and one on an array key,
which the native sort leaves to Spark. Neither shuffles: one of the application's local dirs is a
full tmpfs (test/ui/run.sh), where Spark's own shuffle files would fail, while Spillway's spills go
to the other dir. Then writes what the application itself says about them to OUT_JSON: the
application id, its UI's address, for each query its SQL execution id, the bytes its stages
spilled to disk by Spark's own task metrics (the REST API's stage figures, per stage and summed)
and the sorts Spillway left to Spark (SpillwaySortRule.fallbacksOf), and the bytes all the
application's stages spilled. Then waits, with its UI up, until the file RELEASE exists, and
stops.

Usage: spark-submit ... spilling_job.py OUT_JSON RELEASE
"""
import json
import os
import sys
import time
import urllib.request

from pyspark.sql import SparkSession

SPILLING = "spillway-ui-test: spilling sort"
FALLBACK = "spillway-ui-test: sort left to Spark"


def rest(ui, path):
    with urllib.request.urlopen(ui + "/api/v1" + path, timeout=30) as r:
        return json.load(r)


def main(out_json, release):
    spark = SparkSession.builder.appName("spillway-ui-test").getOrCreate()
    sc = spark.sparkContext
    open(out_json + ".started", "w").close()
    wait_for_file(out_json + ".filled", 120)

    sc.setJobDescription(SPILLING)
    spilling = (spark.range(0, 400000, numPartitions=2)
                .selectExpr("id", "cast(rand(7) * 1e12 as bigint) as k", "repeat('x', 40) as pad")
                .sortWithinPartitions("k"))
    spilling.write.format("noop").mode("overwrite").save()

    sc.setJobDescription(FALLBACK)
    fallback = spark.range(0, 2000, numPartitions=2).selectExpr("id", "array(id % 7, id) as arr").sortWithinPartitions("arr")
    fallback.write.format("noop").mode("overwrite").save()
    fallback_lines = list(spark._jvm.spillway.sql.SpillwaySortRule.fallbacksOf(fallback._jdf))
    sc.setJobDescription(None)

    app = sc.applicationId
    ui = sc.uiWebUrl
    # Spark's own view of the queries: the SQL executions by description, their jobs' stages.
    executions = {e["description"]: e for e in rest(ui, "/applications/%s/sql?details=false" % app)}
    stages = rest(ui, "/applications/%s/stages" % app)

    def query(description):
        e = executions[description]
        job_ids = set(e.get("successJobIds", [])) | set(e.get("failedJobIds", [])) | set(e.get("runningJobIds", []))
        stage_ids = set()
        for j in job_ids:
            stage_ids.update(rest(ui, "/applications/%s/jobs/%d" % (app, j))["stageIds"])
        spilled = {s["stageId"]: s["diskBytesSpilled"] for s in stages if s["stageId"] in stage_ids and s["diskBytesSpilled"] > 0}
        return {"executionId": e["id"], "stageIds": sorted(stage_ids), "diskBytesSpilled": sum(spilled.values()),
                "stagesSpilled": {str(k): v for k, v in sorted(spilled.items())}}

    result = {
        "appId": app,
        "ui": ui,
        "spilling": query(SPILLING),
        "fallback": dict(query(FALLBACK), fallbacks=fallback_lines),
        "diskBytesSpilled": sum(s["diskBytesSpilled"] for s in stages),
    }
    with open(out_json + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.rename(out_json + ".tmp", out_json)
    print("spilling-job: wrote %s" % out_json, flush=True)

    wait_for_file(release, 600)
    spark.stop()


def wait_for_file(path, seconds):
    deadline = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > deadline:
            print("spilling-job: no %s after %d s" % (path, seconds), file=sys.stderr)
            break
        time.sleep(0.2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
