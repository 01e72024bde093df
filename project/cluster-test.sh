#!/usr/bin/env bash
# A real multi-process run of Spillway (`make cluster-test`): a Spark standalone master and two
# workers on loopback, from the Spark distribution inside the pyspark package on PyPI, and
# spark-submit of spillway.demo.ClusterDemo from the demo jar, the product jar beside it, with
# spark.plugins=spillway.demo.ClusterDemoPlugin (the product's plugin, observed by the demo).
#
# Checks: every executor JVM started the plugin (library loaded, orphan sweep done), spilled, and
# left no plan dir; an executor killed mid-spill left an orphan that its replacement's plugin swept
# (ClusterDemo checks these inside the application: exit status 0 and `cluster-demo-result=passed`);
# and after the applications, nothing of Spillway is left anywhere under the cluster's dirs. The
# executors run under a hard memory limit (a memory cgroup per worker and application, which the
# worker's executors join), sized as docs/user-guide/memory.md ("Sizing executors") sizes a
# container, while a native SQL sort spills and, right after it, a hash aggregate takes the
# execution memory the sort gave back: once in off-heap mode (the application above) and once in
# on-heap mode (a second application of ClusterDemo, the sort and the aggregate alone). No
# executor may be killed for memory in either (ClusterDemo's steps 4 and 5; each limit's peak is
# printed). One of each executor's two local dirs is a small tmpfs (mounted here, as root, and
# unmounted on exit) that another process of this script fills to the last byte while a native
# sort writes its runs there (ClusterDemo's step 6) and frees later: the runs must go to the other
# dir while it is full (none on it), come back once it is freed, and the sort's result must be
# Spark's own sort's; the task metrics, the plugin's counters (spillFiles, filesystemErrors) and
# its per-local-dir figures over the sort are printed. Before all that, an application is killed
# outright: kill -9 of its driver while its executors hold spill files; once the workers have
# killed its executors (their cgroup empty) and the master has ended it, the plan dirs it left are
# counted, the next application's executors (the off-heap one) sweep orphans at their start, and
# after that application nothing of either may be left. With CLUSTER_SOAK_SECONDS set,
# spillway.demo.ClusterSoak then runs that long on the same cluster (off-heap mode): concurrent
# spilling SQL sorts with Spark's results, a session over its plan limit refused with
# SpillLimitExceededException, one cancelling its queries, and each executor's RSS, descriptors,
# threads and plan dirs flat between its first and last minute. Last, after three applications
# that must fail at once (a bad setting, no library for the platform, another line's jar), the
# workers are started again with one local dir each, a tmpfs of a few MiB (mounted here, as root,
# and unmounted on exit), and spillway.demo.ClusterOverflow runs inside project/s3-server.sh
# (s3proxy on loopback) with the remote tier (spark.spillway.remote.uri) on its bucket: a native
# SQL sort whose runs are several times that local dir must complete with its input's rows in
# order, its executors' remote counters and updates and the sort's `remote runs` must show that
# runs went to the store, and afterwards the bucket must hold no object or part of an upload, the
# tmpfs nothing of the application, and the cluster's dirs no plan dir. The cluster's state comes
# from the master's JSON API, never from its log text.
#
# Everything lives in build/: the venv (build/pyspark-<version>, kept between runs) and the cluster's
# dirs and logs (build/cluster-<line>, fresh each run). Loopback only; every wait is bounded; the master,
# the workers and their executors are stopped on exit, however the script ends.
#
# Usage: project/cluster-test.sh [LINE], LINE a key of project/spark-lines (3.5_2.12, 4.1_2.13;
# default the primary line) whose pyspark ships that Scala version.
# Environment: PYTHON (default python3), SPARK_TEST_TIMEOUT (seconds for spark-submit, default 600),
# CLUSTER_SOAK_SECONDS (the soak's length; default 0, no soak), CLUSTER_SOAK_SORT (spark: the soak's
# load on Spark's own sort, its baseline).
# Needs the line's product and demo jars: run through `make cluster-test`, which builds them; and
# java and mvn for project/s3-server.sh (which fetches s3proxy on first use).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
# shellcheck source=project/lines.sh
source "$repo_root/project/lines.sh"

line="${1:-$(primary_line_key)}"
die() { echo "cluster-test [$line]: $*" >&2; exit 1; }
log() { echo "cluster-test [$line]: $*"; }

started=$(date +%s)
spark_version="$(line_field "$line" 3)"
[[ -n "$spark_version" ]] || die "no line $line in project/spark-lines (there are: $(line_keys | tr '\n' ' '))"
jar="$(line_jar "$line")"
[[ -f "$jar" ]] || die "no $(line_artifact "$line") jar under $(line_target "$line"): run \`make cluster-test\`"
scala="${line#*_}"
if [[ "$line" == "$(primary_line_key)" ]]; then demo_target=scala-shim/demo/target; else demo_target="target/demo${line//./}"; fi
demo_jar="$(ls "$demo_target/scala-$scala/spillway-demo_$scala-"*.jar 2>/dev/null | head -1 || true)"
[[ -f "$demo_jar" ]] || die "no demo jar in $demo_target/scala-$scala: run \`make cluster-test\`"
demo_jar="$repo_root/$demo_jar"

# ---- Spark: pyspark==<the line's Spark version> in a venv under build/ ----
# shellcheck source=project/pyspark-venv.sh
source "$repo_root/project/pyspark-venv.sh"
ensure_pyspark_venv cluster-test "$spark_version" || die "no pyspark venv"
[[ "$pyspark_scala" == "$scala" ]] || die "pyspark $spark_version ships Scala $pyspark_scala, not $scala: no cluster test for $line"
export SPARK_HOME
[[ -x "$SPARK_HOME/bin/spark-class" && -x "$SPARK_HOME/bin/spark-submit" ]] || die "no bin/spark-class in $SPARK_HOME"

# ---- The cluster's dirs, fresh ----
cluster="$repo_root/build/cluster-$line"
rm -rf "$cluster"
mkdir -p "$cluster/conf" "$cluster/tmp" "$cluster/driver-local"
# Spark's daemons, driver and executors all read this dir (spark-class puts it on the classpath):
# quiet logs, but Spark's deploy messages and Spillway's own lines at INFO, for whoever reads them.
cat >"$cluster/conf/log4j2.properties" <<'EOF'
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.deploy.name = org.apache.spark.deploy
logger.deploy.level = info
logger.spillway.name = spillway
logger.spillway.level = info
EOF
export SPARK_CONF_DIR="$cluster/conf"
export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1 # bind every socket and UI to loopback
export SPARK_DAEMON_MEMORY=256m
export SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false" # no REST server on fixed port 6066
unset SPARK_LOCAL_DIRS SPARK_WORKER_DIR SPARK_MASTER_HOST SPARK_MASTER_PORT MASTER

# ---- Processes: each daemon in its own process group (setsid), killed as a group on exit, so
# its executors go with it ----
pgids=()
cgroups=()
mounts=()
filler_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for _ in $(seq 1 50); do # up to 10 s for a clean stop
    local alive=0
    for g in "${pgids[@]}"; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  [[ -z "$filler_pid" ]] || { kill "$filler_pid" 2>/dev/null || true; wait "$filler_pid" 2>/dev/null || true; }
  for m in "${mounts[@]}"; do # free once no process has a file open there
    for _ in $(seq 1 50); do umount "$m" 2>/dev/null && break; sleep 0.2; done
    if mountpoint -q "$m"; then echo "cluster-test [$line]: could not unmount $m" >&2; status=1; fi
  done
  for cg in "${cgroups[@]}"; do # empty once its processes are gone
    for _ in $(seq 1 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
    [[ ! -d "$cg" ]] || echo "cluster-test [$line]: could not remove the cgroup $cg" >&2
  done
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_daemon() { # log-file class args...
  local logfile="$1"; shift
  setsid "$SPARK_HOME/bin/spark-class" "$@" >"$logfile" 2>&1 </dev/null &
  pgids+=("$!") # setsid with a fresh process: its pid is the group id
}
stop_daemon() { # pgid: stops a daemon of start_daemon as the cleanup does (its group), and forgets it
  local g="$1" p kept=()
  kill -TERM -- "-$g" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.2; done # up to 10 s
  kill -KILL -- "-$g" 2>/dev/null || true
  wait "$g" 2>/dev/null || true
  for p in "${pgids[@]}"; do [[ "$p" == "$g" ]] || kept+=("$p"); done
  pgids=("${kept[@]}")
}

wait_for() { # seconds description command...
  local seconds="$1" what="$2"; shift 2
  local deadline=$(( $(date +%s) + seconds ))
  until "$@"; do
    (( $(date +%s) < deadline )) || die "timed out after ${seconds}s waiting for $what"
    sleep 0.5
  done
}

free_port() { "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
master_port="$(free_port)"
master_ui_port="$(free_port)"
master="spark://127.0.0.1:$master_port"
# The master's state from its web UI's JSON API (/json/): the workers alive, or the applications
# it has registered (running and completed) or those running. Fails while the master is not up.
master_state() { # workers | apps | active
  "$venv/bin/python" - "$master_ui_port" "$1" <<'PY'
import json, sys, urllib.request
state = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/" % sys.argv[1], timeout=5))
print({"workers": state["aliveworkers"], "active": len(state["activeapps"]),
       "apps": len(state["activeapps"]) + len(state["completedapps"])}[sys.argv[2]])
PY
}
start_daemon "$cluster/master.log" org.apache.spark.deploy.master.Master --host 127.0.0.1 \
  --port "$master_port" --webui-port "$master_ui_port"
master_started() { master_state workers >/dev/null 2>&1; }
wait_for 120 "the master to start (see $cluster/master.log)" master_started
log "master at $master"

# The executors' containers, sized as docs/user-guide/memory.md ("Sizing executors") says, one
# memory cgroup per worker and application: off-heap mode, executor memory + off-heap size +
# overhead; on-heap mode, executor memory + overhead, the overhead grown by the execution memory
# the sorts may take (spark.memory.fraction 0.6 x (executor memory - 300 MiB), rounded up). Each
# executor joins its worker's cgroup of the time as it starts: the worker runs executors with a
# java that joins the cgroup named in the worker's cgroup file, then becomes the real java (the
# worker itself stays outside).
executor_memory_mib=512 offheap_mib=64 overhead_mib=384
onheap_overhead_mib=$(( overhead_mib + (6 * (executor_memory_mib - 300) + 9) / 10 ))
if [[ -f /sys/fs/cgroup/memory/memory.limit_in_bytes && -w /sys/fs/cgroup/memory ]]; then
  cgroup_version=1 cgroup_base=/sys/fs/cgroup/memory
elif [[ -w /sys/fs/cgroup && -f /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
  cgroup_version=2 cgroup_base=/sys/fs/cgroup
else
  die "no writable memory cgroup (v1 at /sys/fs/cgroup/memory, or v2 with the memory controller): the executors must run under a hard memory limit; run as root"
fi
real_java="${JAVA_HOME:+$JAVA_HOME/bin/java}"
real_java="$(readlink -f "${real_java:-$(command -v java)}")"
mkdir -p "$cluster/java-home/bin"
cat >"$cluster/java-home/bin/java" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do
  if [[ "\$a" == org.apache.spark.executor.CoarseGrainedExecutorBackend && -n "\${SPILLWAY_EXECUTOR_CGROUP_FILE:-}" ]]; then
    echo \$\$ >"\$(cat "\$SPILLWAY_EXECUTOR_CGROUP_FILE")/cgroup.procs" || exit 1
    break
  fi
done
exec "$real_java" "\$@"
EOF
chmod +x "$cluster/java-home/bin/java"
cgroup_file() { # cgroup v1-file v2-file
  if ((cgroup_version == 1)); then echo "$1/$2"; else echo "$1/$3"; fi
}
app_cgroup() { echo "$cgroup_base/spillway-cluster-${line//./}-worker$2-$1-$$"; } # application worker
# executor_cgroups APP BYTES: a cgroup of BYTES per worker, which its executors started from now on join.
executor_cgroups() {
  local i cg
  for i in 1 2; do
    cg="$(app_cgroup "$1" "$i")"
    mkdir "$cg" || die "could not create the cgroup $cg"
    cgroups+=("$cg")
    echo "$2" >"$(cgroup_file "$cg" memory.limit_in_bytes memory.max)"
    if ((cgroup_version == 2)); then echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
    else echo "$2" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true; fi
    echo "$cg" >"$cluster/worker$i/cgroup"
  done
}
# check_cgroups APP SIZING: under the limit, the executors joined their cgroups (a peak worth an
# executor) and none was killed for memory; logs each peak against its limit.
check_cgroups() {
  local i cg limit peak oom_kills
  for i in 1 2; do
    cg="$(app_cgroup "$1" "$i")"
    limit="$(cat "$(cgroup_file "$cg" memory.limit_in_bytes memory.max)")"
    peak="$(cat "$(cgroup_file "$cg" memory.max_usage_in_bytes memory.peak)" 2>/dev/null || echo 0)"
    if ((cgroup_version == 1)); then oom_kills="$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control")"
    else oom_kills="$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.events")"; fi
    log "$1: executors of worker $i: limit $((limit >> 20)) MiB ($2), peak $((peak >> 20)) MiB, killed for memory ${oom_kills:-?} times"
    if [[ -z "$oom_kills" || "$oom_kills" -ne 0 ]]; then log "$1: an executor was killed for memory (or the kernel does not count oom kills)"; failed=1; fi
    if ((peak < 128 << 20)); then log "$1: no executor ran in $cg (peak $peak bytes): the limit was not applied"; failed=1; fi
  done
}

# Each worker's executors have two local dirs: a dir of the cluster's, and a small tmpfs that
# ClusterDemo's step 6 fills (mounted here, unmounted on exit). Spark's own files of the
# applications (shuffles, the aggregate's spills) land on it too, half of them (up to some 140 MB
# seen): 384 MiB holds them with room to spare. Its pages count in the memory of whoever wrote them.
small_mib=384
mount_tmpfs() { # dir MiB: a tmpfs there, unmounted on exit
  mkdir -p "$1"
  mount -t tmpfs -o "size=${2}m,mode=0755" "spillway-cluster-${1##*/}" "$1" || die "could not mount a tmpfs on $1 (run as root)"
  mounts+=("$1")
}
# start_worker N LOCAL-DIRS LOG: worker N, its executors' local dirs LOCAL-DIRS (comma-separated).
# One core per worker: the two executors run on different workers, and a killed executor's
# replacement starts on the worker it died on, in the same application dir.
worker_pgids=()
start_worker() {
  SPARK_LOCAL_DIRS="$2" JAVA_HOME="$cluster/java-home" SPILLWAY_EXECUTOR_CGROUP_FILE="$cluster/worker$1/cgroup" \
    start_daemon "$3" \
    org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --port 0 --webui-port 0 \
    --cores 1 --memory 1g --work-dir "$cluster/worker$1/work" "$master"
  worker_pgids+=("${pgids[-1]}")
}
for i in 1 2; do
  mkdir -p "$cluster/worker$i/local" "$cluster/worker$i/work"
  mount_tmpfs "$cluster/worker$i/small" "$small_mib"
  start_worker "$i" "$cluster/worker$i/local,$cluster/worker$i/small" "$cluster/worker$i.log"
done
registered() { [[ "$(master_state workers 2>/dev/null)" -ge 2 ]]; }
wait_for 120 "two workers to register (see $cluster/worker*.log)" registered
log "2 workers registered"

# ---- The applications: spillway.demo.ClusterDemo ----
# spark-submit's arguments for ClusterDemo, before each application's own.
# Without the class: ClusterSoak's application (further down) takes the same.
demo_args=(--master "$master" --deploy-mode client --jars "$jar"
  --conf spark.plugins=spillway.demo.ClusterDemoPlugin
  --conf spark.executor.cores=1 --conf spark.cores.max=2
  --conf spark.executor.memory=${executor_memory_mib}m --driver-memory 512m
  --conf spark.sql.extensions=spillway.SpillwayExtensions
  --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1
  --conf spark.ui.enabled=false
  --conf spark.local.dir="$cluster/driver-local"
  --conf "spark.executor.extraJavaOptions=-Djava.io.tmpdir=$cluster/tmp"
  --driver-java-options "-Djava.io.tmpdir=$cluster/tmp")
# run_demo APP MODE spark-submit-args...: one application of ClusterDemo; fails the test unless it
# ends with `cluster-demo-result=passed`.
run_demo() {
  local app="$1" mode="$2" status=0 t0; shift 2
  t0=$(date +%s)
  log "$app: spark-submit of spillway.demo.ClusterDemo $mode"
  timeout "${SPARK_TEST_TIMEOUT:-600}" "$SPARK_HOME/bin/spark-submit" --class spillway.demo.ClusterDemo "${demo_args[@]}" "$@" "$demo_jar" 2 $mode \
    >"$cluster/$app.out" 2>"$cluster/$app.err" || status=$?
  sed 's/^/  /' "$cluster/$app.out"
  if [[ $status -ne 0 ]] || [[ "$(tail -1 "$cluster/$app.out")" != "cluster-demo-result=passed" ]]; then
    tail -40 "$cluster/$app.err" >&2
    die "$app: the application failed (status $status); logs in $cluster"
  fi
  log "$app: passed in $(( $(date +%s) - t0 )) s"
}
failed=0

# ---- An application killed outright ----
# ClusterDemo in mode `killed`: each executor's task spills and holds its plan. Once both
# executors' plan dirs are on disk, kill -9 of the driver (spark-submit's JVM). The master sees
# the driver go and has the workers kill its executors (the cgroup of each worker's executors of
# that application empties); what the application left in the workers' local dirs is then for the
# next application's executors to sweep at their start (the off-heap application below), and
# after that one ends nothing of either may be left (the scan further down).
spillway_dirs_of() { find "$cluster/worker$1" -ignore_readdir_race -type d -name 'spillway-*' 2>/dev/null | wc -l; }
executors_gone() { # APP: no process left in that application's cgroups
  local i
  for i in 1 2; do [[ -z "$(cat "$(app_cgroup "$1" "$i")/cgroup.procs")" ]] || return 1; done
}
no_app_running() { [[ "$(master_state active 2>/dev/null)" == 0 ]]; }
executor_cgroups killed $(( (executor_memory_mib + offheap_mib + overhead_mib) << 20 ))
t0=$(date +%s)
log "killed: spark-submit of spillway.demo.ClusterDemo killed"
setsid timeout "${SPARK_TEST_TIMEOUT:-600}" "$SPARK_HOME/bin/spark-submit" --class spillway.demo.ClusterDemo "${demo_args[@]}" \
  --conf spark.memory.offHeap.enabled=true --conf spark.memory.offHeap.size=${offheap_mib}m \
  --conf spark.executor.memoryOverhead=${overhead_mib}m \
  "$demo_jar" 2 killed >"$cluster/killed.out" 2>"$cluster/killed.err" </dev/null &
killed_group=$!
pgids+=("$killed_group")
both_spilling() { (( $(spillway_dirs_of 1) > 0 && $(spillway_dirs_of 2) > 0 )); }
wait_for 180 "both executors of the application to be killed to spill (see $cluster/killed.err)" both_spilling
driver_pid="$(ps -o pid= --ppid "$killed_group" | tr -d ' ')" # timeout's child: spark-submit, exec'd into the JVM
grep -qa org.apache.spark.deploy.SparkSubmit "/proc/$driver_pid/cmdline" 2>/dev/null ||
  die "killed: the driver's JVM is not timeout's child ($driver_pid: $(tr '\0' ' ' <"/proc/$driver_pid/cmdline" 2>/dev/null))"
log "killed: plan dirs on disk (worker 1: $(spillway_dirs_of 1), worker 2: $(spillway_dirs_of 2)); kill -9 of the driver, pid $driver_pid"
kill -KILL "$driver_pid"
{ wait "$killed_group"; } 2>/dev/null || true # timeout, killed with its child's signal
wait_for 120 "the killed application's executors to be gone" executors_gone killed
wait_for 60 "the master to end the killed application" no_app_running
left_by_killed=$(( $(spillway_dirs_of 1) + $(spillway_dirs_of 2) ))
log "killed: its executors are gone, $(( $(date +%s) - t0 )) s after its start; plan dirs it left in the workers' dirs: $left_by_killed (worker 1: $(spillway_dirs_of 1), worker 2: $(spillway_dirs_of 2)); its application dirs left: $(find "$cluster"/worker[12]/{local,small} -mindepth 1 -maxdepth 1 -name 'spark-*' | wc -l)"

# ---- The other process of ClusterDemo's step 6: a local dir that fills while the sort runs ----
# Once the application has written $fault/armed, for each worker: it fills all but 16 MiB of its
# small tmpfs; as the sort's first run lands on either dir, it fills the rest to the last byte
# (ballast files) and lists the runs on both dirs; once two new runs have landed on the other
# dir, it deletes the ballast; then it waits for a new run on the tmpfs (ClusterDemo paces the
# sort's input: a run every half second or so). Each step goes to $fault/workerN.log, the state reached to
# $fault/workerN.state (full, freed, back), the new runs on the tmpfs while it was full to
# $fault/workerN.while-full. It ends when the application writes $fault/done (or at the
# application's bound), deleting a ballast still there.
fault="$cluster/fault"
mkdir -p "$fault"
runs_in() { find "$1" -ignore_readdir_race -path '*/spillway-*/*' -type f 2>/dev/null | sort || true; }
fill_while_sorting() {
  local deadline=$(( $(date +%s) + ${SPARK_TEST_TIMEOUT:-600} )) i small other w avail new_other new_small back
  until [[ -e "$fault/armed" || -e "$fault/done" ]]; do (( $(date +%s) < deadline )) || return 0; sleep 0.2; done
  # Before the sort writes: all but 16 MiB of each tmpfs at once, so that filling the rest as the
  # first run lands takes a moment.
  for i in 1 2; do
    small="$cluster/worker$i/small"
    avail="$(df -B1 --output=avail "$small" | tail -1 | tr -d ' ')"
    mkdir "$small/ballast"
    fallocate -l "$(( avail > 16 << 20 ? avail - (16 << 20) : 4096 ))" "$small/ballast/0" 2>/dev/null || true
    echo waiting >"$fault/worker$i.state"
  done
  while [[ ! -e "$fault/done" ]] && (( $(date +%s) < deadline )); do
    for i in 1 2; do
      small="$cluster/worker$i/small" other="$cluster/worker$i/local" w="$fault/worker$i"
      case "$(cat "$w.state")" in
        waiting)
          if [[ -n "$(runs_in "$small")$(runs_in "$other")" ]]; then
            dd if=/dev/zero of="$small/ballast/1" bs=64k status=none 2>/dev/null || true # until ENOSPC
            runs_in "$other" >"$w.other-at-fill"; runs_in "$small" >"$w.small-at-fill"
            echo "filled the tmpfs: $(( $(du -sb "$small/ballast" | cut -f1) >> 20 )) MiB written, $(df -B1 --output=avail "$small" | tail -1 | tr -d ' ') bytes left, as the sort's first runs landed ($(wc -l <"$w.small-at-fill") on it, $(wc -l <"$w.other-at-fill") on the other dir)" >>"$w.log"
            echo full >"$w.state"
          fi ;;
        full)
          new_other="$(comm -13 "$w.other-at-fill" <(runs_in "$other") | wc -l)"
          if ((new_other >= 2)); then
            new_small="$(comm -13 "$w.small-at-fill" <(runs_in "$small") | wc -l)"
            rm -rf "$small/ballast"
            runs_in "$small" >"$w.small-at-free"
            echo "$new_small" >"$w.while-full"
            echo "while it was full: $new_other new runs on the other dir, $new_small on the tmpfs; freed it" >>"$w.log"
            echo freed >"$w.state"
          fi ;;
        freed)
          back="$(comm -13 "$w.small-at-free" <(runs_in "$small") | wc -l)"
          if ((back >= 1)); then
            echo "freed: a new run on the tmpfs again" >>"$w.log"
            echo back >"$w.state"
          fi ;;
      esac
    done
    sleep 0.05
  done
  rm -rf "$cluster/worker1/small/ballast" "$cluster/worker2/small/ballast"
}

# Off-heap mode: every step of ClusterDemo (the plugin in each executor, a killed executor's
# orphan swept, a native SQL sort spilling, then a hash aggregate taking the execution memory, and
# a local dir that fills during a sort), the executors' updates every 500 ms for step 6.
executor_cgroups offheap $(( (executor_memory_mib + offheap_mib + overhead_mib) << 20 ))
fill_while_sorting &
filler_pid=$!
run_demo offheap "all $fault" \
  --conf spark.memory.offHeap.enabled=true --conf spark.memory.offHeap.size=${offheap_mib}m \
  --conf spark.executor.memoryOverhead=${overhead_mib}m --conf spark.spillway.ui.updateInterval=500ms
wait "$filler_pid" || true
filler_pid=""
# The next application's executors on those workers swept at their start what the killed one left.
swept_at_start="$(awk '/^spill: executor/ { for (i = 1; i < NF; i++) if ($i == "start") { n += $(i + 1) } } END { print n + 0 }' "$cluster/offheap.out")"
log "killed: the next application's first executors swept $swept_at_start orphaned plan dir(s) at their start, of the $left_by_killed the killed one left"
for i in 1 2; do
  sed "s/^/  worker $i: /" "$fault/worker$i.log" 2>/dev/null || true
  if [[ "$(cat "$fault/worker$i.state" 2>/dev/null)" != back ]]; then
    log "full local dir: worker $i's tmpfs did not fill, free and take a run again during the sort (state: $(cat "$fault/worker$i.state" 2>/dev/null || echo none))"; failed=1
  elif [[ "$(cat "$fault/worker$i.while-full")" -ne 0 ]]; then
    log "full local dir: new runs landed on worker $i's tmpfs while it was full"; failed=1
  fi
done
check_cgroups offheap "${executor_memory_mib}m heap + ${offheap_mib}m off-heap + ${overhead_mib}m overhead"

# On-heap mode: the sort and the aggregate, in two shuffle partitions, so that each executor sorts
# its whole share at once and is granted all the execution memory there is.
executor_cgroups onheap $(( (executor_memory_mib + onheap_overhead_mib) << 20 ))
run_demo onheap onheap \
  --conf spark.executor.memoryOverhead=${onheap_overhead_mib}m \
  --conf spark.sql.shuffle.partitions=2 --conf spark.sql.adaptive.coalescePartitions.enabled=false
check_cgroups onheap "${executor_memory_mib}m heap + ${onheap_overhead_mib}m overhead: ${overhead_mib}m + 0.6 x (${executor_memory_mib}m - 300m)"

# ---- Sustained SQL load (spillway.demo.ClusterSoak), CLUSTER_SOAK_SECONDS long; 0 skips it ----
# Off-heap mode, sized as the first application; CLUSTER_SOAK_SORT=spark runs the same load on
# Spark's own sort, the baseline.
soak_seconds="${CLUSTER_SOAK_SECONDS:-0}"
if ((soak_seconds > 0)); then
  executor_cgroups soak $(( (executor_memory_mib + offheap_mib + overhead_mib) << 20 ))
  soak_status=0 t0=$(date +%s)
  log "soak: spark-submit of spillway.demo.ClusterSoak for $soak_seconds s"
  timeout $(( soak_seconds + ${SPARK_TEST_TIMEOUT:-600} )) "$SPARK_HOME/bin/spark-submit" \
    --class spillway.demo.ClusterSoak "${demo_args[@]}" \
    --conf spark.memory.offHeap.enabled=true --conf spark.memory.offHeap.size=${offheap_mib}m \
    --conf spark.executor.memoryOverhead=${overhead_mib}m \
    "$demo_jar" "$soak_seconds" 2 "${CLUSTER_SOAK_SORT:-spillway}" >"$cluster/soak.out" 2>"$cluster/soak.err" || soak_status=$?
  sed 's/^/  /' "$cluster/soak.out"
  if [[ $soak_status -ne 0 ]] || [[ "$(tail -1 "$cluster/soak.out")" != "cluster-soak-result=passed" ]]; then
    tail -40 "$cluster/soak.err" >&2
    die "soak: the application failed (status $soak_status); logs in $cluster"
  fi
  log "soak: passed in $(( $(date +%s) - t0 )) s"
  check_cgroups soak "${executor_memory_mib}m heap + ${offheap_mib}m off-heap + ${overhead_mib}m overhead"
fi

# ---- Nothing of Spillway left under the cluster's dirs (plan dirs, owner locks) ----
# Plan dirs are directories (the workers' copies of spillway-demo_*.jar are not); owner locks, files.
# The executors may still be deleting their blockmgr dirs (the SQL sort's shuffle makes many):
# -ignore_readdir_race covers an entry that vanishes before find examines it, not a dir that
# vanishes between its listing and its opening (seen in CI), so a scan that failed only on
# vanished paths is run again.
scan_left() { find "$cluster" -ignore_readdir_race \( -type d -name 'spillway-*' -o -name '.spillway-*' \) -print; }
check_left() { # after-what
  local attempt left
  for attempt in 1 2 3 4 5; do
    if left="$(scan_left 2>"$cluster/find.err")"; then break; fi
    if grep -qv 'No such file or directory' "$cluster/find.err" || ((attempt == 5)); then
      cat "$cluster/find.err" >&2
      die "could not scan $cluster for what Spillway left behind"
    fi
    sleep 1
  done
  if [[ -n "$left" ]]; then
    log "left behind after $1:"; echo "$left"; failed=1
  else
    log "no plan dir or owner lock left under $cluster after $1"
  fi
}
check_left "the applications"
copies="$(find "$cluster/tmp" -name 'libspillway-*' | wc -l)"
log "extracted library copies left in the JVMs' tmp dir: $copies"
[[ $copies -eq 0 ]] || failed=1

# ---- A broken installation ends the application at once, with the reason ----
# Three more applications, from a Python driver (spark.range needs no Python on the executors):
# 1. a bad setting: SparkContext creation fails on the driver, before the master hears of it;
# 2. no library for the executors' platform (-Dos.arch=riscv64): each executor
#    fails at start and the master would relaunch it without end; the plugin's driver side fails
#    the job with the executor's message instead and requests no more executors;
# 3. another Spark line's jar (below): SparkContext creation fails, naming the jar to use.
# The driver writes its outcome to a file itself: spark-submit copies the Python process's output
# through a JVM thread that may not have copied the traceback when spark-submit exits (seen in CI).
printf '%s\n' 'import sys' 'from pyspark.sql import SparkSession' \
  'with open(sys.argv[2], "w") as outcome:' \
  '    try:' \
  '        spark = SparkSession.builder.appName(sys.argv[1]).getOrCreate()' \
  '        outcome.write("count=%d\n" % spark.range(1000).count())' \
  '        spark.stop()' \
  '    except Exception as e:' \
  '        outcome.write("failed: %s\n" % e)' \
  '        raise' >"$cluster/count.py"
export PYSPARK_PYTHON="$venv/bin/python" PYSPARK_DRIVER_PYTHON="$venv/bin/python"
fail_fast() { # name expected-message extra-spark-submit-args...
  local name="$1" expected="$2"; shift 2
  local t0 status=0 apps_before apps took
  apps_before="$(master_state apps)"
  t0=$(date +%s); rm -f "$cluster/$name.outcome"
  # The bound is generous (2 shared cores): what must fail here is a hang, never a slow start.
  timeout 180 "$SPARK_HOME/bin/spark-submit" \
    --master "$master" --deploy-mode client \
    --jars "${submit_jar:-$jar}" --conf spark.plugins=spillway.SpillwayPlugin \
    --conf spark.executor.cores=1 --conf spark.cores.max=2 \
    --conf spark.executor.memory=512m --driver-memory 512m \
    --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
    --conf spark.ui.enabled=false --conf spark.local.dir="$cluster/driver-local" \
    --driver-java-options "-Djava.io.tmpdir=$cluster/tmp" \
    "$@" "$cluster/count.py" "$name" "$cluster/$name.outcome" >"$cluster/$name.out" 2>"$cluster/$name.err" || status=$?
  took=$(( $(date +%s) - t0 ))
  apps=$(( $(master_state apps) - apps_before ))
  if [[ $status -eq 124 ]]; then
    log "$name: did NOT end within 180 s"; failed=1
  elif [[ $status -eq 0 ]] || grep -qs "^count=" "$cluster/$name.outcome"; then
    log "$name: the application succeeded; it must fail"; failed=1
  elif ! grep -qsF "$expected" "$cluster/$name.outcome"; then
    log "$name: failed (status $status) without the message \"$expected\":"
    cat "$cluster/$name.outcome" 2>/dev/null; tail -20 "$cluster/$name.err"; failed=1
  else
    log "$name: failed in $took s with \"$expected\" (applications registered with the master: $apps)"
  fi
  last_apps=$apps
}
fail_fast bad-setting "Invalid value '10x' for spark.spillway.maxTempDirectorySize: unknown unit 'x'" \
  --conf spark.spillway.maxTempDirectorySize=10x \
  --conf "spark.executor.extraJavaOptions=-Djava.io.tmpdir=$cluster/tmp"
[[ $last_apps -eq 0 ]] || { log "bad-setting: the application reached the master"; failed=1; }
fail_fast broken-install "cancelled Spillway cannot start on executor" \
  --conf "spark.executor.extraJavaOptions=-Djava.io.tmpdir=$cluster/tmp -Dos.arch=riscv64"
grep -qs "no native library for linux/riscv64" "$cluster/broken-install.outcome" ||
  { log "broken-install: the job's error does not give the executor's cause"; failed=1; }

# 3. another line's jar: SparkContext creation fails on the driver with the artifact to use.
wrong_line="$(line_keys | grep -vxF "$line" | tail -1)"
submit_jar="$(line_jar "$wrong_line")"
[[ -f "$submit_jar" ]] || die "no $(line_artifact "$wrong_line") jar: run \`make cluster-test\`"
fail_fast wrong-jar "is built for Spark ${wrong_line%_*} on Scala ${wrong_line#*_}, but this is Spark $spark_version on Scala $scala" \
  --conf "spark.executor.extraJavaOptions=-Djava.io.tmpdir=$cluster/tmp"
grep -qsF "use io.github.spillway:$(line_artifact "$line"):$(spillway_version) instead" "$cluster/wrong-jar.outcome" ||
  { log "wrong-jar: the error does not name $(line_artifact "$line")"; failed=1; }
[[ $last_apps -eq 0 ]] || { log "wrong-jar: the application reached the master"; failed=1; }
unset submit_jar

# ---- A sort larger than the executors' local dirs, through the remote tier ----
# The workers are stopped and started again, each with one local dir only: a tmpfs the size of
# Spark's copy of the application's jars there (its fetch cache) and 4 MiB more (mounted here,
# unmounted on exit). Inside project/s3-server.sh (s3proxy on loopback, its bucket's files in
# SPILLWAY_S3_DATA), spillway.demo.ClusterOverflow runs a native sort within partitions (no
# shuffle: nothing of Spark's own outgrows the tmpfs) whose runs are several times that local dir
# per executor, with spark.spillway.remote.uri on the bucket, in on-heap mode under the memory
# cgroups. It checks the result (count, digest and order against its input's), each executor's
# remote counters and updates, the sort's `remote runs`, and, once it stopped, that the bucket
# holds no file (cluster-overflow-result=passed). Then the workers must have removed the
# application's dirs from their tmpfs, and no plan dir may be left under the cluster's dirs.
tiny_mib=$(( (($(stat -c %s "$jar") + $(stat -c %s "$demo_jar") + (1 << 20) - 1) >> 20) + 4 ))
t0=$(date +%s)
for g in "${worker_pgids[@]}"; do stop_daemon "$g"; done
worker_pgids=()
no_worker() { [[ "$(master_state workers 2>/dev/null)" == 0 ]]; }
wait_for 60 "the master to see the workers gone" no_worker
for i in 1 2; do
  mount_tmpfs "$cluster/worker$i/tiny" "$tiny_mib"
  start_worker "$i" "$cluster/worker$i/tiny" "$cluster/worker$i-overflow.log"
done
wait_for 120 "two workers to register again (see $cluster/worker*-overflow.log)" registered
log "overflow: the workers started again in $(( $(date +%s) - t0 )) s, each with a $tiny_mib MiB tmpfs as its only local dir"
executor_cgroups overflow $(( (executor_memory_mib + onheap_overhead_mib) << 20 ))
overflow_status=0
log "overflow: spark-submit of spillway.demo.ClusterOverflow inside project/s3-server.sh"
project/s3-server.sh timeout "${SPARK_TEST_TIMEOUT:-600}" "$SPARK_HOME/bin/spark-submit" \
  --class spillway.demo.ClusterOverflow "${demo_args[@]}" \
  --conf spark.executor.memoryOverhead=${onheap_overhead_mib}m \
  "$demo_jar" 2 >"$cluster/overflow.out" 2>"$cluster/overflow.err" || overflow_status=$?
sed 's/^/  /' "$cluster/overflow.out"
if [[ $overflow_status -ne 0 ]] || [[ "$(tail -1 "$cluster/overflow.out")" != "cluster-overflow-result=passed" ]]; then
  tail -40 "$cluster/overflow.err" >&2
  die "overflow: the application failed (status $overflow_status); logs in $cluster"
fi
check_cgroups overflow "${executor_memory_mib}m heap + ${onheap_overhead_mib}m overhead"
# The workers remove an application's dirs once it has ended: what may stay on each tmpfs is the
# worker's own root dir (spark-*, removed as the worker stops), empty.
tiny_left() {
  local d
  for d in "$cluster"/worker[12]/tiny; do find "$d" -mindepth 1 \( -path "$d/*/*" -o ! -name 'spark-*' -o ! -type d \) -print; done 2>/dev/null || true
}
for _ in $(seq 1 150); do [[ -z "$(tiny_left)" ]] && break; sleep 0.2; done # up to 30 s
if [[ -n "$(tiny_left)" ]]; then
  log "overflow: left on the workers' tmpfs 30 s after the application:"; tiny_left | head -20; failed=1
else
  log "overflow: the workers' tmpfs hold nothing but each worker's own empty root dir (used: $(df -k --output=used "$cluster"/worker[12]/tiny | tail -n +2 | tr -d ' ' | paste -sd ' ' | sed 's/ / and /') KiB)"
fi
check_left "the overflow"
log "overflow: done in $(( $(date +%s) - t0 )) s"

((failed == 0)) || die "FAILED; logs in $cluster"
log "passed in $(( $(date +%s) - started )) s"
