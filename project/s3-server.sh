#!/usr/bin/env bash
# A real S3-compatible server for the remote tier's tests: s3proxy (org.gaul:s3proxy, Apache 2.0)
# with its filesystem backend, on a free loopback port, in a temp dir under build/ removed on exit.
# It runs COMMAND with the server up and stops the server afterwards, however COMMAND ends; the
# exit status is COMMAND's.
#
# COMMAND sees:
#   SPILLWAY_S3_ENDPOINT    http://127.0.0.1:<port>
#   SPILLWAY_S3_ACCESS_KEY  the server's access key (a test value, made per run)
#   SPILLWAY_S3_SECRET_KEY  the server's secret key (a test value, made per run)
#   SPILLWAY_S3_BUCKET      an empty bucket that exists
#   SPILLWAY_S3_DATA        the dir that holds the bucket's files (the backend's own view: parts
#                           of uploads in progress included)
#   SPILLWAY_S3_JAR         the s3proxy jar, for a test that starts (and kills, and restarts) a
#                           server of its own: `java -jar $SPILLWAY_S3_JAR --properties FILE` with
#                           the properties above, its own endpoint and basedir, and the same
#                           access and secret keys (spill/internal/s3server does that)
#   SPILLWAY_S3_PID         the server's process id, for a benchmark that counts the server's CPU
#
# With SPILLWAY_S3_CPUS set (a taskset CPU list), the server runs on those CPUs only: a benchmark
# that gives the server cores of its own, as a store on other machines has.
#
# The jar (jar-with-dependencies, S3PROXY_VERSION) is fetched into the local Maven repository
# with mvn on first use. Needs java (17) and mvn. Every wait is bounded.
#
# Usage: project/s3-server.sh COMMAND [ARG...]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
S3PROXY_VERSION="${S3PROXY_VERSION:-2.6.0}"
die() { echo "s3-server: $*" >&2; exit 1; }
[[ $# -gt 0 ]] || die "usage: project/s3-server.sh COMMAND [ARG...]"

m2="${MAVEN_REPO:-$HOME/.m2/repository}"
jar="$m2/org/gaul/s3proxy/$S3PROXY_VERSION/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"
if [[ ! -f "$jar" ]]; then
	echo "s3-server: fetching s3proxy $S3PROXY_VERSION with mvn"
	mvn -q dependency:get -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" -Dtransitive=false >&2 ||
		die "mvn could not fetch org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies"
	[[ -f "$jar" ]] || die "mvn fetched s3proxy but $jar is not there (set MAVEN_REPO to the local repository)"
fi

mkdir -p "$repo_root/build"
work="$(mktemp -d "$repo_root/build/s3-server.XXXXXX")"
pid=
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
access="spillway-test-$RANDOM$RANDOM"
secret="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
bucket="spillway-test"
mkdir -p "$work/data/$bucket"
cat >"$work/s3proxy.conf" <<EOF
s3proxy.endpoint=http://127.0.0.1:$port
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$access
s3proxy.credential=$secret
jclouds.provider=filesystem
jclouds.identity=$access
jclouds.credential=$secret
jclouds.filesystem.basedir=$work/data
EOF
pin=()
[[ -z "${SPILLWAY_S3_CPUS:-}" ]] || pin=(taskset -c "$SPILLWAY_S3_CPUS")
"${pin[@]}" java -jar "$jar" --properties "$work/s3proxy.conf" >"$work/s3proxy.log" 2>&1 &
pid=$!

# Up once it answers HTTP at all (an unsigned request gets 403): at most 60 s.
up=
for _ in $(seq 600); do
	kill -0 "$pid" 2>/dev/null || { cat "$work/s3proxy.log" >&2; die "s3proxy exited at start"; }
	if curl -s -o /dev/null "http://127.0.0.1:$port/"; then up=1; break; fi
	sleep 0.1
done
[[ -n "$up" ]] || { cat "$work/s3proxy.log" >&2; die "s3proxy did not answer on 127.0.0.1:$port within 60 s"; }
echo "s3-server: s3proxy $S3PROXY_VERSION on 127.0.0.1:$port, bucket $bucket"

status=0
SPILLWAY_S3_ENDPOINT="http://127.0.0.1:$port" SPILLWAY_S3_ACCESS_KEY="$access" \
	SPILLWAY_S3_SECRET_KEY="$secret" SPILLWAY_S3_BUCKET="$bucket" SPILLWAY_S3_DATA="$work/data/$bucket" \
	SPILLWAY_S3_JAR="$jar" SPILLWAY_S3_PID="$pid" "$@" || status=$?
exit "$status"
