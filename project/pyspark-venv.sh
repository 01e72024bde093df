# Sourced by project/cluster-test.sh and project/pyspark-example.sh: Spark from the pyspark package
# (which carries a Spark distribution: jars and bin/ scripts) of one Spark version, in a venv under
# build/ kept between runs (~350-450 MB the first time).
#
# ensure_pyspark_venv NAME SPARK_VERSION: makes sure $repo_root/build/pyspark-SPARK_VERSION holds
# that pyspark, installing it with PYTHON (default python3) if not; sets venv and SPARK_HOME (the
# distribution inside the package) and pyspark_scala (the Scala binary version it ships, 2.12 or
# 2.13). NAME prefixes its messages.
ensure_pyspark_venv() {
  local name="$1" spark_version="$2" python="${PYTHON:-python3}"
  venv="$repo_root/build/pyspark-$spark_version"
  if ! "$venv/bin/python" -c "import pyspark, sys; sys.exit(pyspark.__version__ != '$spark_version')" 2>/dev/null; then
    command -v "$python" >/dev/null || { echo "$name: $python not found (needed to install pyspark, which carries Spark)" >&2; return 1; }
    echo "$name: installing pyspark==$spark_version into $venv (a Spark distribution, ~400 MB)"
    rm -rf "$venv"
    "$python" -m venv "$venv" || { echo "$name: could not create a venv (on Debian/Ubuntu: apt-get install python3-venv)" >&2; return 1; }
    timeout 900 "$venv/bin/pip" install --no-input --disable-pip-version-check -q "pyspark==$spark_version"
  fi
  SPARK_HOME="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
  local library
  library="$(ls "$SPARK_HOME"/jars/scala-library-*.jar 2>/dev/null | head -1)"
  [[ -n "$library" ]] || { echo "$name: no scala-library jar in $SPARK_HOME/jars" >&2; return 1; }
  pyspark_scala="$(basename "$library" | sed 's/^scala-library-\([0-9]*\.[0-9]*\).*/\1/')"
}
