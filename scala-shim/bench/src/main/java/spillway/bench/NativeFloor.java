package spillway.bench;

import spillway.NativeLoader;

/**
 * The floor of the plan lifecycle benchmarks: one empty JNI call into the library. The product
 * library has no such native; the test build has (build/libspillway-testhooks.so, from `make
 * lib-testhooks`: jni/testhooks.go), and {@link Report} runs the floor's fork on it alone, while
 * every other benchmark runs on the product library.
 */
final class NativeFloor {
  /** The system property naming the test build, for {@link Report}'s floor fork. */
  static final String LIBRARY_PROPERTY = "spillway.bench.testhooksLibrary";

  static {
    NativeLoader.load();
    try {
      emptyCall();
    } catch (UnsatisfiedLinkError e) {
      throw new UnsatisfiedLinkError(
          NativeLoader.loadedFrom() + " has no NativeFloor.emptyCall: the floor needs the library's"
              + " test build (make lib-testhooks: build/libspillway-testhooks.so) in"
              + " -Dspillway.library.path");
    }
  }

  private NativeFloor() {}

  /** Does nothing, in the library. */
  static native void emptyCall();
}
