package spillway;

/**
 * Stands in for the shim's NativeLoader in the jni test binary, which links the library in: there
 * is nothing to load. The test JVM compiles the shim's own NativeSpill against it (jvm_test.go),
 * and jvmhost binds NativeSpill's natives with RegisterNatives before the class initialises.
 */
public final class NativeLoader {
  private NativeLoader() {}

  public static void load() {}
}
