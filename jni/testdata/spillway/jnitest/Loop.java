package spillway.jnitest;

import java.io.IOException;
import spillway.NativeSpill;

/**
 * Loops of JNI calls into the library linked into the jni test binary, for its Go benchmarks
 * (jni/bench_test.go), and a store into a String[] for its tests: each loop runs in Java, so every
 * call is a real Java-to-native call, as in an executor, and Go times the whole loop. The plans go
 * through the shim's own NativeSpill, whose natives jvmhost binds to the library's entry points
 * with RegisterNatives (jvmhost.BindNatives); emptyCall is bound to NativeFloor.emptyCall of the
 * test build (-tags spillway_testhooks).
 */
public final class Loop {
  private Loop() {}

  static native void emptyCall();

  /** a[i] = s: a caller changing its array between calls (createplan_test.go). */
  public static void set(String[] a, int i, String s) {
    a[i] = s;
  }

  /** n times two empty calls: the floor of a create and a release. */
  public static void empty(int n) {
    for (int i = 0; i < n; i++) {
      emptyCall();
      emptyCall();
    }
  }

  /** n plans created with createPlan(String[], long) and released. */
  public static void createPlans(int n, String[] localDirs) throws IOException {
    for (int i = 0; i < n; i++) {
      NativeSpill.releasePlan(NativeSpill.createPlan(localDirs, 100L << 30));
    }
  }

  /**
   * n plans created with createPlan(String[], long) and released, from two arrays of equal content
   * whose Strings are distinct objects, alternately: a caller whose list is the same but not the
   * same objects (a list split from a setting each time).
   */
  public static void createPlansAlternating(int n, String[] a, String[] b) throws IOException {
    for (int i = 0; i < n; i++) {
      NativeSpill.releasePlan(NativeSpill.createPlan((i & 1) == 0 ? a : b, 100L << 30));
    }
  }

  /** n plans created with createPlanIn and released. */
  public static void createPlansIn(int n, long dirs) throws IOException {
    for (int i = 0; i < n; i++) {
      NativeSpill.releasePlan(NativeSpill.createPlanIn(dirs, 100L << 30, Long.MAX_VALUE));
    }
  }
}
