# Sourced by project/cluster-test.sh and project/pyspark-example.sh: Spark from the pyspark package
# (which carries a Spark distribution: jars and bin/ scripts), pinned to the Spark version of
# build.sbt, in a venv under build/ kept between runs (~450 MB the first time).
#
# ensure_pyspark_venv NAME: makes sure $repo_root/build/pyspark-venv holds that pyspark, installing
# it with PYTHON (default python3) if not; sets spark_version and venv. NAME prefixes its messages.
ensure_pyspark_venv() {
  local name="$1" python="${PYTHON:-python3}"
  spark_version="$(sed -n 's/^val sparkVersion = "\(.*\)"/\1/p' "$repo_root/build.sbt")"
  [[ -n "$spark_version" ]] || { echo "$name: no sparkVersion in build.sbt" >&2; return 1; }
  venv="$repo_root/build/pyspark-venv"
  if ! "$venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$spark_version')" 2>/dev/null; then
    command -v "$python" >/dev/null || { echo "$name: $python not found (needed to install pyspark, which carries Spark)" >&2; return 1; }
    echo "$name: installing pyspark==$spark_version into $venv (a Spark distribution, ~450 MB)"
    rm -rf "$venv"
    "$python" -m venv "$venv" || { echo "$name: could not create a venv (on Debian/Ubuntu: apt-get install python3-venv)" >&2; return 1; }
    timeout 900 "$venv/bin/pip" install --no-input --disable-pip-version-check -q "pyspark==$spark_version"
  fi
}
