// The build compiles spillway.NativePlatform into itself and asks it for this platform's <os>/<arch>
// (build.sbt's resource path of the library in the jar): the loader's mapping is the only one.
Compile / unmanagedSources +=
  baseDirectory.value.getParentFile / "scala-shim" / "src" / "main" / "java" / "spillway" / "NativePlatform.java"
