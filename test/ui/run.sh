#!/usr/bin/env bash
# The Spillway tab in a real browser (`make test-ui`): headless Chromium (Debian's chromium and
# chromium-driver) driven through WebDriver by Selenium, against a spilling PySpark application
# in local mode (its live UI) and a History Server on its event log; see test/ui/check_ui.py for
# what is checked. Spark is the line's, from the pyspark package (build/pyspark-<version>, shared
# with the other tests); Selenium is installed into build/ui-test-venv on first use.
#
# Usage: test/ui/run.sh [LINE], LINE a key of project/spark-lines whose pyspark ships that Scala
# version (3.5_2.12, 4.1_2.13; default the primary line). Needs the line's jar (`make test-ui`).
#
# One of the application's local dirs is a small tmpfs, filled by check_ui.py once the application
# has started: the tab must show it full while Spillway spills to the other dir. Mounting it takes root (CI runs as
# root): the full-disk case runs on every run, it is never skipped.
#
# Everything it makes lives in build/ui-test-<line>: removed on exit (the tmpfs unmounted first),
# however the run ends, except the screenshots, the JSON read and the logs, which stay for whoever
# reads them.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
# shellcheck source=project/lines.sh
source "$repo_root/project/lines.sh"
line="${1:-$(primary_line_key)}"
die() { echo "ui-test [$line]: $*" >&2; exit 1; }

spark_version="$(line_field "$line" 3)"
[[ -n "$spark_version" ]] || die "no line $line in project/spark-lines (there are: $(line_keys | tr '\n' ' '))"
jar="$(line_jar "$line")"
[[ -f "$jar" ]] || die "no $(line_artifact "$line") jar: run \`make test-ui\`, which builds it"
jar="$repo_root/${jar#"$repo_root"/}"
[[ "$(id -u)" == 0 ]] || die "needs root, to mount the full tmpfs of the full-disk case"
for b in /usr/bin/chromium /usr/bin/chromedriver; do
  [[ -x "$b" ]] || die "$b is missing: apt-get install chromium chromium-driver"
done

# shellcheck source=project/pyspark-venv.sh
source "$repo_root/project/pyspark-venv.sh"
ensure_pyspark_venv ui-test "$spark_version" || die "no pyspark venv"
[[ "$pyspark_scala" == "${line#*_}" ]] || die "pyspark $spark_version ships Scala $pyspark_scala, not ${line#*_}: no UI test for $line"

selenium_venv="$(test/ui/selenium-venv.sh)" || die "no selenium"

out="$repo_root/build/ui-test-$line"
work="$out/work"
full_dir="$work/full"
mounted=
if mountpoint -q "$full_dir" 2>/dev/null; then umount "$full_dir"; fi # a killed run's
rm -rf "$out"
mkdir -p "$work"
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # check_ui.py stops what it started; this stops what a killed run left: the process groups it
  # wrote down (the application, the History Server, chromedriver and its Chromium).
  if [[ -f "$out/pgids" ]]; then
    while read -r g; do kill -TERM -- "-$g" 2>/dev/null || true; done <"$out/pgids"
    sleep 1
    while read -r g; do kill -KILL -- "-$g" 2>/dev/null || true; done <"$out/pgids"
    rm -f "$out/pgids"
  fi
  if [[ -n "$mounted" ]]; then umount "$full_dir" || umount -l "$full_dir"; fi
  if [[ -d "$work" ]]; then
    cp "$work"/*.log "$out/" 2>/dev/null || true
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The local dir to fill: a 64 MiB tmpfs (Spark copies the application's jar into a local dir as
# it starts).
mkdir -p "$full_dir"
mount -t tmpfs -o size=64m,mode=0755 spillway-ui-test "$full_dir"
mounted=1

# Selenium's own driver manager stays off: the driver and the browser are given by path. The
# application runs on the pyspark venv's Python.
SE_AVOID_STATS=true SE_OFFLINE=true PYSPARK_PYTHON="$venv/bin/python" \
  "$selenium_venv/bin/python" test/ui/check_ui.py "$work" "$SPARK_HOME" "$jar" "$out" "$full_dir"
