# Sourced by the scripts that run Spark outside sbt (project/cluster-test.sh,
# project/pyspark-example.sh): the Spark lines of project/spark-lines, by key <line>_<scala binary>
# (such as 3.5_2.12), and where sbt puts each line's jars.

# The keys, in file order (the last is the primary line).
line_keys() {
  awk '!/^#/ && NF == 4 { print $1 "_" $2 }' "$repo_root/project/spark-lines"
}

primary_line_key() { line_keys | tail -1; }

# line_field KEY N: column N (3 = Spark version, 4 = Scala version) of the line KEY.
line_field() {
  awk -v key="$1" -v n="$2" '!/^#/ && NF == 4 && $1 "_" $2 == key { print $n }' "$repo_root/project/spark-lines"
}

# line_artifact KEY: spillway-spark3.5_2.12.
line_artifact() { echo "spillway-spark$1"; }

# line_project KEY: the sbt project id: spark35_212 (the primary line is the root project, `spillway`).
line_project() {
  local key="$1"
  if [[ "$key" == "$(primary_line_key)" ]]; then echo spillway; else echo "spark${key//./}"; fi
}

# line_target KEY: the target dir of the line's product project.
line_target() {
  local key="$1"
  if [[ "$key" == "$(primary_line_key)" ]]; then echo "$repo_root/target"; else echo "$repo_root/target/$(line_project "$key")"; fi
}

# line_jar KEY: the line's product jar, once built (`make jar`); empty when not built. Not its
# sources or tests jar (`...-tests.jar` sorts before the product's own).
line_jar() {
  local key="$1"
  ls "$(line_target "$key")/scala-${key#*_}/$(line_artifact "$key")-"*.jar 2>/dev/null | grep -v -e '-sources.jar$' -e '-tests.jar$' | head -1 || true
}

# spillway_version: the version of build.sbt (0.1.0-SNAPSHOT).
spillway_version() { sed -n 's/^val spillwayVersion = "\(.*\)"/\1/p' "$repo_root/build.sbt"; }
