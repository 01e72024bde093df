// Spillway JVM side: the JNI class, its loader and the Spark hook (sources in scala-shim/).
// Bootstrap with project/sbt (downloads the sbt launcher from Maven Central); see the Makefile.

// One jar per Spark line, from one source tree: project/spark-lines lists the lines (Spark and
// Scala versions), the last one primary. What differs between lines lives in small per-line
// folders beside the shared sources, scala-shim/src/{main,test}/spark-<line>/scala; the rest of the
// tree names no version. The primary line is the root project (`spillway`), every other line a
// project of its own (`spark35_212`, ...) over the same sources, with its own target dir.
// project/SparkLineBuild.scala reads project/spark-lines.
lazy val sparkLines: Seq[SparkLineBuild] = SparkLineBuild.all(file("project/spark-lines"))
lazy val primaryLine = sparkLines.last
def sparkLine(id: String): SparkLineBuild = sparkLines.find(_.id == id)
  .getOrElse(sys.error(s"no Spark line $id in project/spark-lines"))

val spillwayVersion = "0.1.0-SNAPSHOT"
val spillwayGroup = "io.github.spillway"

// Where the freshly built native library lives (`make lib`); -Dspillway.library.path overrides it
// for both the jar and the tests, the same property the runtime loader honours.
lazy val nativeLibrary = settingKey[File]("the native library bundled into the jar and used by tests")

// This platform's <os>/<arch>, the jar resource path the loader looks the library up at: asked of
// spillway.NativePlatform itself, which project/native-platform.sbt compiles into the build.
def nativePlatform: String = _root_.spillway.NativePlatform.current()

// Spark on Java 17 needs these opens in every JVM that runs it (tests, the demos, the benchmarks).
val sparkJava17Options = Seq(
  "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
  "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "jdk.internal.ref",
  "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar"
).map(p => s"--add-opens=java.base/$p=ALL-UNNAMED") ++ Seq(
  "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
  "-Djdk.reflect.useDirectMethodHandle=false",
  "-Dio.netty.tryReflectionSetAccessible=true"
)

// The options of every forked JVM that runs Spark with the fresh library (tests, demos, benchmarks).
def sparkJvmOptions(repo: File, library: File): Seq[String] = sparkJava17Options ++ Seq(
  "-Xmx2g",
  s"-Dspillway.library.path=${library.getAbsolutePath}",
  s"-Dlog4j2.configurationFile=${(repo / "scala-shim" / "conf" / "log4j2.properties").getAbsolutePath}"
)

// The Rust JNI library of spillway.DataFusionTaskSortSuite (spillway-datafusion's example
// datafusion_task_sort_jni), given to the test JVM as -Dspillway.datafusion.jni.library: `make
// test-jvm` builds it and passes its path in that property; sbt run alone looks where make puts it.
lazy val datafusionJniLibrary = settingKey[File]("the Rust JNI library DataFusionTaskSortSuite loads")

// The compiler of line `l`: the Scala version its Spark release is built with.
def scalaOptions(l: SparkLineBuild) = Seq(
  scalaVersion := l.scala,
  javacOptions ++= Seq("--release", "17"),
  scalacOptions ++= Seq("-release", "17", "-deprecation", "-feature", "-unchecked", "-Xlint")
)

// `run` and `runMain` of a project whose Spark is Provided: on the full compile classpath, forked,
// printing the program's own output (not sbt's "[info]/[error]").
def sparkRunSettings = Seq(
  Compile / run := Defaults.runTask(Compile / fullClasspath, Compile / run / mainClass, Compile / run / runner).evaluated,
  Compile / runMain := Defaults.runMainTask(Compile / fullClasspath, Compile / run / runner).evaluated,
  run / fork := true,
  run / connectInput := false,
  run / outputStrategy := Some(StdoutOutput),
  run / javaOptions ++= sparkJvmOptions((ThisBuild / baseDirectory).value, (spillway / nativeLibrary).value)
)

def sparkProvided(l: SparkLineBuild) = "org.apache.spark" %% "spark-sql" % l.spark % Provided

// Where `make publish-local` installs every line's jar and POM: a Maven repository under build/,
// for `spark-submit --packages ... --repositories file://...` (what project/pyspark-example.sh runs).
lazy val localMavenRepo = settingKey[File]("the local Maven repository of `make publish-local`")

// The jars of the other lines, which spillway.SparkLineSuite loads into this line's Spark.
lazy val otherLineJars = taskKey[Seq[File]]("the product jars of every other Spark line")

// The settings of one Spark line's product project: the jar with the library, the plugin, the SQL
// extension and the API, its POM, and the suites against that line's Spark.
def lineSettings(l: SparkLineBuild) = scalaOptions(l) ++ Seq(
  name := l.name,
  moduleName := l.name, // as it is: sbt's default would make the line's dot a dash
  organization := spillwayGroup,
  version := spillwayVersion,
  Compile / compile / javacOptions ++= Seq("-Xlint:all", "-Werror"), // not for javadoc
  // Sources live in scala-shim/ (src/main/{java,scala}, src/test/scala, ...), shared by every line;
  // scala-2.12/scala-2.13 folders beside them are picked by Scala version, spark-<line> by line.
  sourceDirectory := (ThisBuild / baseDirectory).value / "scala-shim" / "src",
  Compile / unmanagedSourceDirectories += (Compile / sourceDirectory).value / s"spark-${l.line}" / "scala",
  Test / unmanagedSourceDirectories += (Test / sourceDirectory).value / s"spark-${l.line}" / "scala",
  // Spark and Scala are the cluster's: both are Provided in the POM, so `--packages` brings this jar alone.
  autoScalaLibrary := false,
  libraryDependencies ++= Seq(
    "org.scala-lang" % "scala-library" % l.scala % Provided,
    sparkProvided(l),
    "org.scalatest" %% "scalatest" % "3.2.19" % Test,
    // TPC-H's tables, generated in process (spillway.tpch.TpchTables) for the TPC-H suite and `make bench-sql`.
    "io.trino.tpch" % "tpch" % "1.2" % Test
  ),
  localMavenRepo := (ThisBuild / baseDirectory).value / "build" / "maven",
  publishTo := Some(MavenCache("spillway-local", localMavenRepo.value)),
  Compile / packageDoc / publishArtifact := false,
  pomIncludeRepository := (_ => false),
  nativeLibrary := sys.props.get("spillway.library.path").map(file)
    .getOrElse((ThisBuild / baseDirectory).value / "build" / "libspillway.so"),
  // The jar carries the library at the path the loader extracts it from: this platform's, and
  // those cross-compiled into build/native/<os>/<arch>/ (`make lib-arm64`).
  Compile / resourceGenerators += Def.task {
    val lib = nativeLibrary.value
    if (!lib.isFile) sys.error(s"native library $lib not found: run `make lib` first")
    val native = (Compile / resourceManaged).value / "spillway" / "native"
    val out = native / nativePlatform / lib.getName
    IO.copyFile(lib, out, preserveLastModified = true)
    val crossDir = (ThisBuild / baseDirectory).value / "build" / "native"
    val cross = (crossDir * DirectoryFilter * DirectoryFilter * lib.getName).get
      .map(f => f -> (native / IO.relativize(crossDir, f).get))
      .filter { case (_, to) => to != out }
    cross.foreach { case (from, to) => IO.copyFile(from, to, preserveLastModified = true) }
    out +: cross.map(_._2)
  }.taskValue,
  // What spillway.SparkLine checks the running Spark and Scala against, and names the right jar with.
  Compile / resourceGenerators += Def.task {
    val out = (Compile / resourceManaged).value / "spillway" / "spark-line.properties"
    IO.write(out, Seq(
      s"spark.line=${l.line}",
      s"scala.binary=${l.scalaBinary}",
      s"group=$spillwayGroup",
      s"artifact=${l.artifact}",
      s"version=$spillwayVersion",
      s"supported=${sparkLines.map(o => s"${o.line}_${o.scalaBinary}").mkString(",")}"
    ).mkString("", "\n", "\n"))
    Seq(out)
  }.taskValue,
  otherLineJars := (Compile / packageBin).all(ScopeFilter(inProjects(
    sparkLines.filter(_ != l).map(o => if (o == primaryLine) LocalProject("spillway") else LocalProject(o.id)): _*
  ))).value,
  // Tests run Spark in forked JVMs, one suite at a time (2 cores), against the fresh library.
  Test / fork := true,
  Test / parallelExecution := false,
  Test / testForkedParallel := false,
  // The forked test JVM's java.io.tmpdir is under target/ and removed after the tests: Spark
  // leaves a spark-* temp dir of its own there for its shutdown hook, which a forked JVM
  // ending under sbt does not always get to run. The suites still remove what they create.
  Test / javaOptions += {
    val tmp = target.value / "test-tmp"
    IO.createDirectory(tmp)
    s"-Djava.io.tmpdir=$tmp"
  },
  Test / testOptions += Tests.Cleanup(() => IO.delete(target.value / "test-tmp")),
  datafusionJniLibrary := sys.props.get("spillway.datafusion.jni.library").map(file).getOrElse {
    val cargoTarget = sys.env.get("CARGO_TARGET_DIR").map(file)
      .getOrElse(file(sys.props("user.home")) / ".cache" / "spillway" / "cargo-target")
    cargoTarget / "debug" / "examples" / "libdatafusion_task_sort_jni.so"
  },
  Test / javaOptions ++= sparkJvmOptions((ThisBuild / baseDirectory).value, nativeLibrary.value) ++ Seq(
    // The spill format's shared test vectors, which the JVM reads too (SpillFileVectorsSuite).
    s"-Dspillway.testdata=${((ThisBuild / baseDirectory).value / "testdata").getAbsolutePath}",
    s"-Dspillway.datafusion.jni.library=${datafusionJniLibrary.value.getAbsolutePath}",
    // spillway.SparkLineSuite: this line's Spark (the test's external classpath) and the other lines' jars.
    s"-Dspillway.test.sparkClasspath=${(Test / externalDependencyClasspath).value.files.mkString(java.io.File.pathSeparator)}",
    s"-Dspillway.test.testClasses=${(Test / classDirectory).value}",
    s"-Dspillway.test.ownJar=${(Compile / packageBin).value}",
    s"-Dspillway.test.otherLineJars=${otherLineJars.value.mkString(java.io.File.pathSeparator)}"
  ),
  Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD")
)

Global / concurrentRestrictions += Tags.limit(Tags.ForkedTestGroup, 1)

// The primary line, at the root: every suite runs on it; the demos and benchmarks build on it.
lazy val spillway = (project in file("."))
  .settings(lineSettings(primaryLine))
  .settings(
    // spillway.sql.CometComposeSuite runs Spillway beside Apache DataFusion Comet, whose jar is
    // built per Spark line (this one: 4.1, Scala 2.13) and carries libcomet.so. Test scope on the
    // primary line only: the other lines' classpaths and the product POM never see it. The jar
    // bundles (shaded) what it needs and Spark is already here, so nothing else of its POM comes.
    libraryDependencies += ("org.apache.datafusion" % "comet-spark-spark4.1_2.13" % "1.2.0" % Test).intransitive()
  )

// The other lines: the same sources, compiled against their Spark and Scala, each in target/<id>.
def otherLine(id: String): Project = {
  val l = sparkLine(id)
  Project(id, file("scala-shim") / "lines" / id).settings(
    lineSettings(l),
    target := (ThisBuild / baseDirectory).value / "target" / id
  )
}
lazy val spark35_212 = otherLine("spark35_212")
lazy val spark35_213 = otherLine("spark35_213")
lazy val spark40_213 = otherLine("spark40_213")

// The demos (`make demo`, and spillway.demo.ClusterDemo of `make cluster-test`): programs that
// show and check Spillway in Spark, not part of the product jar. Not aggregated by the root
// project: `compile`/`test` do not build it. `demo` is the primary line's; `demo35_212` the same
// sources on Spark 3.5 and Scala 2.12, for the cluster test on that line.
def demoSettings(l: SparkLineBuild) = scalaOptions(l) ++ sparkRunSettings ++ Seq(
  name := "spillway-demo",
  publish / skip := true,
  autoScalaLibrary := false,
  libraryDependencies ++= Seq("org.scala-lang" % "scala-library" % l.scala % Provided, sparkProvided(l)),
  // ClusterDemo checks the plugin's metrics as Spark's metrics system holds them, with the
  // suites' probe: a test file (not in the product jar), compiled into the demo jar as well.
  Compile / unmanagedSources += (ThisBuild / baseDirectory).value /
    "scala-shim/src/test/scala/org/apache/spark/spillway/PluginMetricsProbe.scala",
  Compile / mainClass := Some("spillway.demo.Demo")
)

lazy val demo = (project in file("scala-shim/demo"))
  .dependsOn(spillway)
  .settings(demoSettings(primaryLine))

lazy val demo35_212 = Project("demo35_212", file("scala-shim/lines/demo35_212"))
  .dependsOn(spark35_212)
  .settings(
    demoSettings(sparkLine("spark35_212")),
    sourceDirectory := (ThisBuild / baseDirectory).value / "scala-shim" / "demo" / "src",
    target := (ThisBuild / baseDirectory).value / "target" / "demo35_212"
  )

// The benchmarks (see docs/benchmarks/index.md): JMH through the real library (`make bench`; Java sources in
// scala-shim/bench/src/main/java) and Spark's sorts against Spillway's (`make bench-sort`, `make
// bench-sql`; Scala sources, run with `bench/runMain` on the full classpath). JMH's annotation
// processor, found on the compile classpath, generates the harness and META-INF/BenchmarkList at
// compile time, so no sbt plugin is needed. project/bench.sh only compiles here and runs JMH
// outside sbt, on this project's runtime classpath, which Spark (Provided) is not on. Not
// aggregated by the root project: `compile`/`test` do not build it.
val jmhVersion = "1.37"

lazy val writeRuntimeClasspath = taskKey[File]("writes the runtime classpath to target/runtime-classpath, for project/bench.sh")

lazy val bench = (project in file("scala-shim/bench"))
  .dependsOn(spillway)
  .settings(
    name := "spillway-bench",
    scalaOptions(primaryLine),
    sparkRunSettings,
    publish / skip := true,
    Compile / compile / javacOptions ++= Seq("-Xlint:all,-processing", "-Werror"),
    libraryDependencies ++= Seq(
      sparkProvided(primaryLine),
      "org.openjdk.jmh" % "jmh-core" % jmhVersion,
      "org.openjdk.jmh" % "jmh-generator-annprocess" % jmhVersion % Provided
    ),
    writeRuntimeClasspath := {
      val file = target.value / "runtime-classpath"
      IO.write(file, (Runtime / fullClasspath).value.files.map(_.getAbsolutePath).mkString(java.io.File.pathSeparator))
      file
    }
  )

// Apache Spark's own SQL suites with Spillway on (`make spark-suites`, project/spark-suites.sh):
// Spark's test jars (spark-sql, spark-catalyst, spark-core, classifier `tests`) and the test
// libraries Spark's build gives them (versions from Spark's parent POM), run outside sbt with
// ScalaTest's Runner through spillway.suites.RunSuites, on the classpath this project writes to
// target/spark-suites-classpath: its own classes, its dependencies and the product's classes with
// the bundled library (the same classpath with the extension off and on). Not aggregated by the root project.
lazy val writeSparkSuitesClasspath = taskKey[File]("writes the classpath of Spark's own suites and Spark's Java 17 options, for project/spark-suites.sh")

lazy val sparkSuites = (project in file("scala-shim/spark-suites"))
  .dependsOn(spillway)
  .settings(
    name := "spillway-spark-suites",
    scalaOptions(primaryLine),
    publish / skip := true,
    // A test library asks for a newer scala-library than Spark's: keep Spark's, as Spark's build does.
    dependencyOverrides += "org.scala-lang" % "scala-library" % primaryLine.scala,
    libraryDependencies ++= {
      val v = primaryLine.spark
      Seq(
        "org.apache.spark" %% "spark-sql" % v,
        "org.apache.spark" %% "spark-sql" % v classifier "tests",
        "org.apache.spark" %% "spark-catalyst" % v classifier "tests",
        "org.apache.spark" %% "spark-core" % v classifier "tests",
        "org.scalatest" %% "scalatest" % "3.2.19",
        "org.scalatestplus" %% "scalacheck-1-18" % "3.2.19.0",
        "org.scalacheck" %% "scalacheck" % "1.18.0",
        "org.scalatestplus" %% "mockito-5-12" % "3.2.19.0",
        "org.mockito" % "mockito-core" % "5.12.0"
      )
    },
    writeSparkSuitesClasspath := {
      val out = target.value / "spark-suites-classpath"
      IO.write(out, (Compile / fullClasspath).value.files.map(_.getAbsolutePath).mkString(java.io.File.pathSeparator))
      IO.writeLines(target.value / "spark-suites-jvm-options", sparkJava17Options)
      out
    }
  )
