package spillway;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The dir lists {@link NativeSpill#createPlan} has seen the library accept, each with a
 * registration of its dirs ({@link NativeSpill#registerLocalDirs}), so that a plan in a list seen
 * before is made by {@link NativeSpill#createPlanIn}: no array crosses into the library and no
 * path is read or validated again.
 *
 * <p>Why a caller cannot poison it: a call copies the caller's array once (each element is read
 * once) and uses only the copy from then on. An entry is made from the copy the library has just
 * accepted, registered from that same copy, and never written again; a lookup compares the
 * call's copy with an entry's element by element with {@link String#equals}: by content, never by
 * the identity of the array. Strings are immutable, so a list equal to an entry's is the list that
 * entry's registration validated, and a caller that changes its array (another String at index
 * i, of the same chars or not, valid or not) finds the entry of what its array holds at the call,
 * or none, and then the library reads, validates and refuses exactly what it holds. Equal Strings
 * that are the same object compare at the cost of a reference check.
 *
 * <p>Bounds: at most {@code maxLists} lists, each of at most {@code maxChars} chars. The
 * registrations the cache makes are never released: they live as long as the process, since a
 * thread may be about to call createPlanIn with any handle it has read from the entries. Once
 * the cache is full a new list is not kept: each call gives it to the library, which converts and
 * validates it, or recognises it by its content among the last lists it validated
 * (plan/dirsets.go).
 *
 * <p>Lookups take no lock: one volatile read of an immutable array of entries. A new list is
 * registered outside any lock and published by compare-and-set; a thread that loses the race to
 * publish the same list, or finds the cache full, releases its registration, which no other
 * thread has seen.
 */
final class DirListCache {
  private static final class Entry {
    final String[] dirs; // a private copy, never written after the library accepted it
    final long registration;

    Entry(String[] dirs, long registration) {
      this.dirs = dirs;
      this.registration = registration;
    }

    boolean holds(String[] other) {
      String[] mine = dirs;
      if (mine.length != other.length) {
        return false;
      }
      for (int i = 0; i < mine.length; i++) {
        if (!mine[i].equals(other[i])) { // mine[i] is never null; other[i] may be
          return false;
        }
      }
      return true;
    }
  }

  private static final Entry[] NONE = new Entry[0];

  private final int maxLists;
  private final long maxChars;
  private final AtomicReference<Entry[]> entries = new AtomicReference<>(NONE);

  DirListCache(int maxLists, long maxChars) {
    this.maxLists = maxLists;
    this.maxChars = maxChars;
  }

  /**
   * {@link NativeSpill#createPlanWithExecutorLimit}: its plan and its exceptions, exactly. A list
   * seen before is a {@link NativeSpill#createPlanIn} in its registration; any other array,
   * null included, goes to {@link NativeSpill#createPlanFromArray}, and a list it accepts is kept
   * if there is room.
   */
  long createPlan(String[] localDirs, long maxTempDirectorySize, long maxExecutorTempDirectorySize) {
    if (localDirs == null) { // the library's exception
      return NativeSpill.createPlanFromArray(null, maxTempDirectorySize, maxExecutorTempDirectorySize);
    }
    String[] dirs = localDirs.clone();
    long registration = find(dirs);
    if (registration != 0) {
      return NativeSpill.createPlanIn(registration, maxTempDirectorySize, maxExecutorTempDirectorySize);
    }
    long plan = NativeSpill.createPlanFromArray(dirs, maxTempDirectorySize, maxExecutorTempDirectorySize);
    remember(dirs);
    return plan;
  }

  /** The registration of the list equal to {@code dirs}, or 0 if none is kept (no handle is 0). */
  long find(String[] dirs) {
    for (Entry e : entries.get()) {
      if (e.holds(dirs)) {
        return e.registration;
      }
    }
    return 0;
  }

  /** How many lists are kept. */
  int size() {
    return entries.get().length;
  }

  /** Keeps {@code dirs}, a private copy the library has just accepted, if there is room. */
  private void remember(String[] dirs) {
    if (entries.get().length >= maxLists || chars(dirs) > maxChars) {
      return;
    }
    long registration;
    try {
      registration = NativeSpill.registerLocalDirs(dirs);
    } catch (RuntimeException | OutOfMemoryError e) {
      return; // the plan is made: only the cache goes without
    }
    Entry entry = new Entry(dirs, registration);
    for (;;) {
      Entry[] seen = entries.get();
      if (seen.length >= maxLists || holdsAny(seen, dirs)) {
        release(registration);
        return;
      }
      Entry[] next = Arrays.copyOf(seen, seen.length + 1);
      next[seen.length] = entry;
      if (entries.compareAndSet(seen, next)) {
        return;
      }
    }
  }

  private static boolean holdsAny(Entry[] seen, String[] dirs) {
    for (Entry e : seen) {
      if (e.holds(dirs)) {
        return true;
      }
    }
    return false;
  }

  private static long chars(String[] dirs) {
    long n = 0;
    for (String d : dirs) {
      n += d.length();
    }
    return n;
  }

  /** Releases a registration no other thread has seen. */
  private static void release(long registration) {
    try {
      NativeSpill.releaseLocalDirs(registration);
    } catch (RuntimeException e) {
      // It stays registered: a few bytes in the library, and never a handle anyone uses.
    }
  }
}
