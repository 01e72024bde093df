"""The Spillway tab in a real browser (test/ui/run.sh): headless Chromium through WebDriver.

1. Starts the spilling application (spilling_job.py) with spark-submit, the plugin and the SQL
   extension on, its event log in WORK/events, and waits for what it says about its queries.
2. In its live UI: finds the Spillway tab in the nav bar, and checks the tab's figures against
   the application's own: the spilling query's bytes on disk equal its stages' diskBytesSpilled
   (Spark's task metrics), with plans spilled, runs and a native sort, and so do its rows in the
   stages table, stage by stage; the other query lists the sort left to Spark with the reason
   SpillwaySortRule.fallbacksOf gives; the executor shows each local dir as a bar, the full tmpfs
   (FULL_DIR) marked full with its size and no byte free as statvfs says, the other not, and the
   executor limit the job set; the timeline's line of the executor ends at the bytes all the
   application's stages spilled. A click on a column's header sorts the queries by it, as
   Spark's tables sort, a second click the other way. The query's link opens the SQL tab's page
   of that query, the stage's the Stages tab's page of that stage; the JSON at /spillway/json says
   the same as the page.
3. Lets the application end, starts a History Server on the event log (the jar on its classpath,
   SPARK_DAEMON_CLASSPATH), opens the application there, finds the tab and checks the same.
4. Fails on an exception or an ERROR line in the application's or the History Server's log, and
   on an error in the browser's console on the tab's page (a script or style that did not load).
Screenshots and the JSON read: SCREENSHOT_DIR/{live,history}-spillway.{png,json}, and one of each
view of the live tab, SCREENSHOT_DIR/live-{queries,timeline,executors,stages}.png. Every process
it starts is stopped when it ends, however it ends.

Usage: check_ui.py WORK SPARK_HOME JAR SCREENSHOT_DIR FULL_DIR
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

HERE = os.path.dirname(os.path.abspath(__file__))
EXECUTOR_LIMIT = 4 << 30  # spark.spillway.maxExecutorTempDirectorySize=4g, as the job sets it

processes = []


class Failure(Exception):
    pass


def log(msg):
    print("ui-test: %s" % msg, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(cmd, logfile, env):
    out = open(logfile, "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)
    processes.append(p)
    record(p.pid)
    return p


def record(pgid):
    """Writes a process group down for run.sh's trap, which stops it if this script is killed."""
    with open(os.path.join(shots, "pgids"), "a") as f:
        f.write("%d\n" % pgid)


def stop_all():
    for p in processes:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def wait_for(seconds, what, check):
    """Polls check() until it returns a true value, at most `seconds`: a bound on a wait, not a timing assertion."""
    deadline = time.time() + seconds
    last = None
    while time.time() < deadline:
        try:
            value = check()
            if value:
                return value
        except Failure:
            raise
        except Exception as e:  # not there yet; say the last reason if it never comes
            last = e
        time.sleep(0.5)
    raise Failure("timed out after %d s waiting for %s%s" % (seconds, what, "" if last is None else ": %s" % last))


def bytes_to_string(size):
    """Spark's Utils.bytesToString: what the UI shows for a size."""
    units = [(1 << 60, "EiB"), (1 << 50, "PiB"), (1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
    for unit, name in units:
        if size >= 2 * unit:
            return "%.1f %s" % (size / unit, name)
    return "%.1f B" % size


def browser(profile):
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1600,1800", "--user-data-dir=%s" % profile]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path="/usr/bin/chromedriver", popen_kw={"start_new_session": True})
    driver = webdriver.Chrome(service=service, options=options)
    record(service.process.pid)
    return driver


def expect(condition, message):
    if not condition:
        raise Failure(message)


def open_tab(driver, url):
    """Opens `url` (an application's UI), then the Spillway tab from its nav bar, as a user would."""
    driver.get(url)
    links = wait_for(60, "the nav bar at %s" % url, lambda: driver.find_elements(By.CSS_SELECTOR, ".navbar a.nav-link"))
    tabs = [a for a in links if a.text.strip() == "Spillway"]
    expect(tabs, "no Spillway tab in the nav bar of %s (tabs: %s)" % (url, [a.text for a in links]))
    tabs[0].click()
    wait_for(30, "the Spillway page", lambda: driver.find_elements(By.ID, "spillway"))
    expect("Spillway" in driver.title, "the page's title is %r" % driver.title)
    check_console(driver, url)


def check_console(driver, where):
    """Fails on an error in the browser's console since the last call: a script, style or image
    of the page that did not load, or a script that threw."""
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    expect(not errors, "errors in the browser's console at %s:\n%s" % (where, "\n".join(errors)))


def column_order(driver, table_id, header, key):
    """Clicks `header` of table `table_id`, as a user sorts a table, and returns the rows' `key`
    attribute in the order shown."""
    th = [h for h in driver.find_elements(By.CSS_SELECTOR, "#%s thead th" % table_id) if h.text.strip().startswith(header)]
    expect(th, "no column %r in #%s" % (header, table_id))
    th[0].click()
    return [r.get_attribute(key) for r in driver.find_elements(By.CSS_SELECTOR, "#%s tbody tr" % table_id)]


def query_row(driver, execution_id):
    return driver.find_element(By.CSS_SELECTOR, "#spillway-queries tr[data-execution-id='%d']" % execution_id)


def check_tab(driver, job, where, ui_root):
    """The tab's figures against the application's own; returns what it read, for the JSON check."""
    spilling, fallback = job["spilling"], job["fallback"]
    expect(spilling["diskBytesSpilled"] > 0, "the spilling query spilled nothing by Spark's metrics: %s" % spilling)

    def spilled_row():
        driver.refresh()
        row = query_row(driver, spilling["executionId"])
        cell = row.find_element(By.CSS_SELECTOR, "td.disk-bytes")
        # The peak is sampled as the sort ends and reaches the driver with the executor's next
        # update (spark.spillway.ui.updateInterval): wait for that too, on the same page load.
        budget = driver.find_elements(By.CSS_SELECTOR, "#spillway-executors tr[data-executor-id='driver'] td.budget")
        peaked = budget and int(budget[0].get_attribute("data-peak-bytes")) > 0
        return row if peaked and int(cell.get_attribute("data-bytes")) == spilling["diskBytesSpilled"] else None
    try:
        row = wait_for(60, "%s: query %d with %d bytes on disk, and a peak of bytes in use" %
                       (where, spilling["executionId"], spilling["diskBytesSpilled"]),
                       spilled_row)
    except Failure:
        driver.save_screenshot(os.path.join(shots, "%s-failed.png" % where))
        raise
    cells = {c.get_attribute("class"): c for c in row.find_elements(By.TAG_NAME, "td")}
    disk = cells["disk-bytes"]
    expect(disk.text == bytes_to_string(spilling["diskBytesSpilled"]),
           "%s: the spilled bytes show as %r, not %r" % (where, disk.text, bytes_to_string(spilling["diskBytesSpilled"])))
    for cls in ["plans-spilled", "sort-runs", "native-sorts"]:
        expect(int(cells[cls].text) >= 1, "%s: %s of the spilling query is %r" % (where, cls, cells[cls].text))
    expect(int(cells["logical-bytes"].get_attribute("data-bytes")) > 0, "%s: no logical bytes" % where)
    link = cells["query"].find_element(By.TAG_NAME, "a").get_attribute("href")
    expect(link.endswith("/SQL/execution/?id=%d" % spilling["executionId"]), "%s: the query links to %s" % (where, link))

    frow = query_row(driver, fallback["executionId"])
    shown = ["Sort [%s] runs as Spark's sort: %s" % (li.find_element(By.CLASS_NAME, "fallback-keys").text,
                                                     li.find_element(By.CLASS_NAME, "fallback-reason").text)
             for li in frow.find_elements(By.CSS_SELECTOR, "li.fallback")]
    expect(fallback["fallbacks"], "the job found no sort left to Spark")
    expect(shown == fallback["fallbacks"], "%s: the sorts left to Spark show as %s, not %s" % (where, shown, fallback["fallbacks"]))

    executor = wait_for(30, "%s: the executor's row" % where,
                        lambda: driver.find_element(By.CSS_SELECTOR, "#spillway-executors tr[data-executor-id='driver']"))
    dirs = executor.find_elements(By.CSS_SELECTOR, ".spillway-dir")
    paths = [d.get_attribute("data-path") for d in dirs]
    expect(len(dirs) == len(local_dirs) and all(any(p.startswith(l + "/") for l in local_dirs) for p in paths),
           "%s: the executor's local dirs show as %s, not under each of %s" % (where, paths, local_dirs))
    full = os.statvfs(full_dir)
    for d in dirs:
        path = d.get_attribute("data-path")
        expect(d.find_elements(By.CSS_SELECTOR, ".spillway-bar .spillway-bar-used"), "%s: no bar for %s" % (where, path))
        expect(d.get_attribute("data-given-up") == "false", "%s: %s marked given up" % (where, path))
        if path.startswith(full_dir + "/"):
            expect(d.get_attribute("data-full") == "true" and d.find_elements(By.CLASS_NAME, "spillway-full"),
                   "%s: the full tmpfs %s is not marked full" % (where, path))
            expect(int(d.get_attribute("data-total-bytes")) == full.f_blocks * full.f_frsize and
                   d.get_attribute("data-free-bytes") == "0" and
                   d.find_element(By.CLASS_NAME, "dir-free").text == "0.0 B free of %s" % bytes_to_string(full.f_blocks * full.f_frsize),
                   "%s: the full tmpfs shows as %r (%s of %d bytes free)" % (where, d.text, d.get_attribute("data-free-bytes"),
                                                                           full.f_blocks * full.f_frsize))
        else:
            expect(d.get_attribute("data-full") == "false", "%s: %s marked full" % (where, path))
    expect(any(p.startswith(full_dir + "/") for p in paths), "%s: no local dir under the full tmpfs %s" % (where, full_dir))
    budget = executor.find_element(By.CSS_SELECTOR, "td.budget")
    expect(budget.get_attribute("data-limit-bytes") == str(EXECUTOR_LIMIT) and
           budget.find_element(By.CLASS_NAME, "limit").text == bytes_to_string(EXECUTOR_LIMIT),
           "%s: the executor limit shows as %r" % (where, budget.text))
    expect(int(budget.get_attribute("data-peak-bytes")) > 0, "%s: no peak of bytes in use" % where)
    read = {"disk": int(disk.get_attribute("data-bytes")), "plans": int(cells["plans-spilled"].text),
            "runs": int(cells["sort-runs"].text), "fallbacks": shown}

    # The stages table: the spilling query's stages, each with the bytes Spark's metrics give it.
    stage_rows = driver.find_elements(By.CSS_SELECTOR, "#spillway-stages tbody tr")
    stages_shown = {}
    for r in stage_rows:
        query_cell = r.find_element(By.CSS_SELECTOR, "td.query").text
        if query_cell == str(spilling["executionId"]):
            sid = r.get_attribute("data-stage-id")
            stages_shown[sid] = stages_shown.get(sid, 0) + int(r.find_element(By.CSS_SELECTOR, "td.disk-bytes").get_attribute("data-bytes"))
    expect(stages_shown == spilling["stagesSpilled"],
           "%s: the stages table shows %s bytes on disk per stage of query %d, Spark's metrics %s" %
           (where, stages_shown, spilling["executionId"], spilling["stagesSpilled"]))
    stage_link = [r for r in stage_rows if r.get_attribute("data-stage-id") in stages_shown][0] \
        .find_element(By.CSS_SELECTOR, "td.stage a").get_attribute("href")

    # The timeline: the executor's line ends at what all the application's stages spilled.
    def timeline_line():
        driver.refresh()
        lines = driver.find_elements(By.CSS_SELECTOR, "#spillway-timeline polyline[data-executor-id='driver']")
        return lines if lines and int(lines[0].get_attribute("data-bytes")) == job["diskBytesSpilled"] else None
    wait_for(30, "%s: the timeline's line of the driver at %d bytes" % (where, job["diskBytesSpilled"]), timeline_line)
    expect(len(driver.find_elements(By.CSS_SELECTOR, "#spillway-timeline polyline")) == 1,
           "%s: the timeline has lines for executors other than the driver" % where)

    # Sorting, as Spark's tables sort: by bytes on disk, up, then down.
    ids = sorted([spilling["executionId"], fallback["executionId"]], key=lambda i: (i != fallback["executionId"]))
    up = column_order(driver, "spillway-queries", "Spilled (on disk)", "data-execution-id")
    expect([int(i) for i in up] == ids, "%s: sorted by bytes on disk, the queries show as %s, not %s" % (where, up, ids))
    down = column_order(driver, "spillway-queries", "Spilled (on disk)", "data-execution-id")
    expect([int(i) for i in down] == ids[::-1], "%s: sorted the other way, the queries show as %s" % (where, down))
    check_console(driver, "%s: the sorted tab" % where)

    read = dict(read, stages=stages_shown, timeline=job["diskBytesSpilled"])
    driver.save_screenshot(os.path.join(shots, "%s-spillway.png" % where))
    if where == "live":
        for view, css in [("queries", "#spillway-queries"), ("timeline", "#spillway-timeline svg"),
                          ("executors", "#spillway-executors"), ("stages", "#spillway-stages")]:
            driver.find_element(By.CSS_SELECTOR, css).screenshot(os.path.join(shots, "live-%s.png" % view))

    # The same as JSON, as an operator's tool would read it.
    driver.get(ui_root + "/spillway/json")
    text = driver.find_element(By.TAG_NAME, "body").text
    with open(os.path.join(shots, "%s-spillway.json" % where), "w") as f:
        f.write(text)
    data = json.loads(text)
    q = [x for x in data["queries"] if x["executionId"] == spilling["executionId"]]
    expect(q and q[0]["diskBytes"] == read["disk"] and q[0]["plansSpilled"] == read["plans"] and q[0]["sortRuns"] == read["runs"],
           "%s: the JSON says %s for the spilling query, the page %s" % (where, q, read))
    f = [x for x in data["queries"] if x["executionId"] == fallback["executionId"]]
    expect(f and ["Sort [%s] runs as Spark's sort: %s" % (x["keys"], x["reason"]) for x in f[0]["fallbacks"]] == shown,
           "%s: the JSON's fallbacks are %s" % (where, f))
    e = [x for x in data["executors"] if x["executorId"] == "driver"]
    expect(e and e[0]["executorLimit"] == EXECUTOR_LIMIT, "%s: the JSON's executor is %s" % (where, e))
    expect([d["full"] for d in e[0]["localDirs"]] == [d["path"].startswith(full_dir + "/") for d in e[0]["localDirs"]],
           "%s: the JSON's local dirs are %s" % (where, e[0]["localDirs"]))
    t = [x for x in data["timeline"] if x["executorId"] == "driver"]
    expect(t and t[0]["points"][-1]["bytesSpilled"] == job["diskBytesSpilled"], "%s: the JSON's timeline is %s" % (where, t))
    js = {}
    for x in data["stages"]:
        if x["sqlExecutionId"] == spilling["executionId"]:
            js[str(x["stageId"])] = js.get(str(x["stageId"]), 0) + x["diskBytes"]
    expect(js == read["stages"], "%s: the JSON's stages are %s, the page's %s" % (where, js, read["stages"]))

    # The stage's link leads to the Stages tab's page of that stage.
    driver.get(stage_link)
    wait_for(30, "%s: the Stages tab's page at %s" % (where, stage_link),
             lambda: "Details for Stage %s" % stage_link.split("id=")[1].split("&")[0] in driver.page_source)

    # The query's link leads to the SQL tab's page of that query.
    driver.get(link)
    wait_for(30, "%s: the SQL tab's page of query %d" % (where, spilling["executionId"]),
             lambda: "Details for Query %d" % spilling["executionId"] in driver.page_source)
    log("%s: the tab shows query %d with %d bytes on disk in %d plan(s), %d run(s), and %s" %
        (where, spilling["executionId"], read["disk"], read["plans"], read["runs"], shown))
    return read


def check_log(path):
    bad = [l.rstrip() for l in open(path, errors="replace") if re.search(r"Exception|\bERROR\b|HTTP ERROR", l)]
    expect(not bad, "%s has exceptions or errors:\n%s" % (path, "\n".join(bad[:40])))


def job_started(job, result):
    if job.poll() is not None:
        raise Failure("the application ended (status %s) as it started: see its job.log" % job.returncode)
    return os.path.exists(result + ".started")


def fill(path):
    """Writes zeros into a file in `path` until its filesystem has no byte left (ENOSPC)."""
    chunk = b"\0" * (64 << 10)
    with open(os.path.join(path, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            if e.errno != 28:  # ENOSPC
                raise
    expect(os.statvfs(path).f_bavail == 0, "%s is not full after filling it" % path)
    log("filled %s (%s)" % (path, bytes_to_string(os.statvfs(path).f_blocks * os.statvfs(path).f_frsize)))


def main(work, spark_home, jar):
    global local_dirs
    events = os.path.join(work, "events")
    # The full tmpfs second: Spark's own scratch files (the first dir's) stay off it.
    local_dirs = [os.path.join(work, "local1"), full_dir]
    for d in [events, local_dirs[0]]:
        os.makedirs(d)
    env = dict(os.environ, SPARK_HOME=spark_home, SPARK_CONF_DIR=os.path.join(work, "conf"),
               SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_HOSTNAME="127.0.0.1")
    os.makedirs(env["SPARK_CONF_DIR"])
    with open(os.path.join(env["SPARK_CONF_DIR"], "log4j2.properties"), "w") as f:
        f.write("rootLogger.level = warn\nrootLogger.appenderRef.stderr.ref = console\n"
                "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
                "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex\n")
    ui_port = free_port()
    result, release = os.path.join(work, "job.json"), os.path.join(work, "release")
    job = start([os.path.join(spark_home, "bin", "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
                 "--jars", jar,
                 "--conf", "spark.plugins=spillway.SpillwayPlugin",
                 "--conf", "spark.sql.extensions=spillway.SpillwayExtensions",
                 "--conf", "spark.spillway.sort.memoryBudget=1m",
                 "--conf", "spark.spillway.maxExecutorTempDirectorySize=4g",
                 "--conf", "spark.spillway.ui.updateInterval=1s",
                 "--conf", "spark.sql.shuffle.partitions=2",
                 "--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.dir=file://" + events,
                 "--conf", "spark.local.dir=" + ",".join(local_dirs),
                 "--conf", "spark.ui.port=%d" % ui_port, "--conf", "spark.port.maxRetries=0",
                 "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                 os.path.join(HERE, "spilling_job.py"), result, release],
                os.path.join(work, "job.log"), env)
    log("started the spilling application, UI on port %d" % ui_port)

    wait_for(120, "the application's SparkContext", lambda: job_started(job, result))
    fill(full_dir)
    open(result + ".filled", "w").close()

    def job_result():
        if job.poll() is not None:
            raise Failure("the application ended (status %s) before its queries were done: see %s/job.log" % (job.returncode, work))
        return os.path.exists(result) and json.load(open(result))
    data = wait_for(600, "the application's queries", job_result)
    log("the application says: %s" % json.dumps(data))
    ui_root = "http://127.0.0.1:%d" % ui_port

    driver = browser(os.path.join(work, "chromium-profile"))
    try:
        open_tab(driver, ui_root + "/")
        live = check_tab(driver, data, "live", ui_root)

        open(release, "w").close()
        status = job.wait(timeout=300)
        expect(status == 0, "the application exited with status %d: see %s/job.log" % (status, work))
        logs = [f for f in os.listdir(events) if data["appId"] in f]
        expect(logs, "no event log for %s in %s" % (data["appId"], events))

        hs_port = free_port()
        hs_env = dict(env, SPARK_DAEMON_CLASSPATH=jar, SPARK_DAEMON_MEMORY="512m",
                      SPARK_HISTORY_OPTS="-Dspark.history.fs.logDirectory=file://%s -Dspark.history.ui.port=%d "
                                         "-Dspark.history.fs.update.interval=1s" % (events, hs_port))
        start([os.path.join(spark_home, "bin", "spark-class"), "org.apache.spark.deploy.history.HistoryServer"],
              os.path.join(work, "history-server.log"), hs_env)
        hs_root = "http://127.0.0.1:%d" % hs_port

        def listed():
            with urllib.request.urlopen(hs_root + "/api/v1/applications", timeout=10) as r:
                return any(a["id"] == data["appId"] for a in json.load(r))
        wait_for(120, "the History Server to list %s" % data["appId"], listed)
        app_root = "%s/history/%s" % (hs_root, data["appId"])
        open_tab(driver, app_root + "/jobs/")
        history = check_tab(driver, data, "history", app_root)
        expect(history == live, "the History Server shows %s, the live UI showed %s" % (history, live))
    finally:
        driver.quit()
    check_log(os.path.join(work, "job.log"))
    check_log(os.path.join(work, "history-server.log"))
    log("passed")


if __name__ == "__main__":
    shots, full_dir = sys.argv[4], os.path.abspath(sys.argv[5])
    try:
        main(sys.argv[1], sys.argv[2], sys.argv[3])
    except Failure as e:
        print("ui-test: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
    finally:
        stop_all()
