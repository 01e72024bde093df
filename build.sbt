// Spillway JVM side: the JNI class, its loader and the Spark hook (sources in scala-shim/).
// Bootstrap with project/sbt (downloads the sbt launcher from Maven Central); see the Makefile.

val sparkVersion = "4.1.3"
// What differs between Spark lines (3.5, 4.0, 4.1) lives in scala-shim/src/main/spark-<line>/, one
// small folder per line beside the shared sources; the rest of the tree names no version.
val sparkLine = sparkVersion.split('.').take(2).mkString(".")

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

val scalaOptions = Seq(
  scalaVersion := "2.13.17", // the Scala version Spark 4.1.x is built with
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

val sparkProvided = "org.apache.spark" %% "spark-sql" % sparkVersion % Provided

lazy val spillway = (project in file("."))
  .settings(
    name := "spillway",
    organization := "io.github.spillway",
    version := "0.1.0-SNAPSHOT",
    scalaOptions,
    Compile / compile / javacOptions ++= Seq("-Xlint:all", "-Werror"), // not for javadoc
    // Sources live in scala-shim/ (src/main/{java,scala}, src/test/scala, ...).
    sourceDirectory := baseDirectory.value / "scala-shim" / "src",
    Compile / unmanagedSourceDirectories += (Compile / sourceDirectory).value / s"spark-$sparkLine" / "scala",
    libraryDependencies ++= Seq(
      sparkProvided,
      "org.scalatest" %% "scalatest" % "3.2.19" % Test,
      // TPC-H's tables, generated in process (spillway.tpch.TpchTables) for the TPC-H suite and `make bench-sql`.
      "io.trino.tpch" % "tpch" % "1.2" % Test
    ),
    nativeLibrary := sys.props.get("spillway.library.path").map(file)
      .getOrElse(baseDirectory.value / "build" / "libspillway.so"),
    // The jar carries the library at the path the loader extracts it from: this platform's, and
    // those cross-compiled into build/native/<os>/<arch>/ (`make lib-arm64`).
    Compile / resourceGenerators += Def.task {
      val lib = nativeLibrary.value
      if (!lib.isFile) sys.error(s"native library $lib not found: run `make lib` first")
      val native = (Compile / resourceManaged).value / "spillway" / "native"
      val out = native / nativePlatform / lib.getName
      IO.copyFile(lib, out, preserveLastModified = true)
      val crossDir = baseDirectory.value / "build" / "native"
      val cross = (crossDir * DirectoryFilter * DirectoryFilter * lib.getName).get
        .map(f => f -> (native / IO.relativize(crossDir, f).get))
        .filter { case (_, to) => to != out }
      cross.foreach { case (from, to) => IO.copyFile(from, to, preserveLastModified = true) }
      out +: cross.map(_._2)
    }.taskValue,
    // Tests run Spark in forked JVMs, one suite at a time (2 cores), against the fresh library.
    Test / fork := true,
    Test / parallelExecution := false,
    Test / testForkedParallel := false,
    Global / concurrentRestrictions += Tags.limit(Tags.ForkedTestGroup, 1),
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
    Test / javaOptions ++= sparkJvmOptions(baseDirectory.value, nativeLibrary.value) ++ Seq(
      // The spill format's shared test vectors, which the JVM reads too (SpillFileVectorsSuite).
      s"-Dspillway.testdata=${(baseDirectory.value / "testdata").getAbsolutePath}",
      s"-Dspillway.datafusion.jni.library=${datafusionJniLibrary.value.getAbsolutePath}"
    ),
    Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD")
  )

// The demos (`make demo`, and spillway.demo.ClusterDemo of `make cluster-test`): programs that
// show and check Spillway in Spark, not part of the product jar. Not aggregated by the root
// project: `compile`/`test` do not build it.
lazy val demo = (project in file("scala-shim/demo"))
  .dependsOn(spillway)
  .settings(
    name := "spillway-demo",
    scalaOptions,
    sparkRunSettings,
    publish / skip := true,
    libraryDependencies += sparkProvided,
    // ClusterDemo checks the plugin's metrics as Spark's metrics system holds them, with the
    // suites' probe: a test file (not in the product jar), compiled into the demo jar as well.
    Compile / unmanagedSources += (spillway / baseDirectory).value /
      "scala-shim/src/test/scala/org/apache/spark/spillway/PluginMetricsProbe.scala",
    Compile / mainClass := Some("spillway.demo.Demo")
  )

// The benchmarks (see BENCHMARKS.md): JMH through the real library (`make bench`; Java sources in
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
    scalaOptions,
    sparkRunSettings,
    publish / skip := true,
    Compile / compile / javacOptions ++= Seq("-Xlint:all,-processing", "-Werror"),
    libraryDependencies ++= Seq(
      sparkProvided,
      "org.openjdk.jmh" % "jmh-core" % jmhVersion,
      "org.openjdk.jmh" % "jmh-generator-annprocess" % jmhVersion % Provided
    ),
    writeRuntimeClasspath := {
      val file = target.value / "runtime-classpath"
      IO.write(file, (Runtime / fullClasspath).value.files.map(_.getAbsolutePath).mkString(java.io.File.pathSeparator))
      file
    }
  )
