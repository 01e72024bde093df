"""The Spark application of the UI test (test/ui/run.sh): PySpark, local mode, Spillway on.

Runs two SQL queries, each under a job description the test finds it by: an ORDER BY that the
native sort runs and spills (a small sort budget), and an ORDER BY on an array key, which the
native sort leaves to Spark. Then writes what the application itself says about them to
OUT_JSON: the application id, its UI's address, and for each query its SQL execution id, the
bytes its stages spilled to disk by Spark's own task metrics (the REST API's stage figures) and
the sorts Spillway left to Spark (SpillwaySortRule.fallbacksOf). Then waits, with its UI up,
until the file RELEASE exists, and stops.

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

    sc.setJobDescription(SPILLING)
    spilling = (spark.range(0, 400000, numPartitions=2)
                .selectExpr("id", "cast(rand(7) * 1e12 as bigint) as k", "repeat('x', 40) as pad")
                .orderBy("k"))
    spilling.write.format("noop").mode("overwrite").save()

    sc.setJobDescription(FALLBACK)
    fallback = spark.range(0, 2000, numPartitions=2).selectExpr("id", "array(id % 7, id) as arr").orderBy("arr")
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
        spilled = sum(s["diskBytesSpilled"] for s in stages if s["stageId"] in stage_ids)
        return {"executionId": e["id"], "stageIds": sorted(stage_ids), "diskBytesSpilled": spilled}

    result = {
        "appId": app,
        "ui": ui,
        "spilling": query(SPILLING),
        "fallback": dict(query(FALLBACK), fallbacks=fallback_lines),
    }
    with open(out_json + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.rename(out_json + ".tmp", out_json)
    print("spilling-job: wrote %s" % out_json, flush=True)

    deadline = time.time() + 600
    while not os.path.exists(release):
        if time.time() > deadline:
            print("spilling-job: no release after 600 s", file=sys.stderr)
            break
        time.sleep(0.5)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
