import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.concurrent.Callable;
import spillway.NativeSpill;
import spillway.SpillLimitExceededException;

/**
 * A JNI client that knows only the card: loads the library, runs a plan's lifecycle through
 * createPlan, createTmpFile and releasePlan (with path, write, releaseTmpFile and usedDiskSpace),
 * and every exception the contract gives. Arguments: the library's path, then two empty dirs and
 * a regular file (a root no plan can use). Exits 1 at the first check that fails.
 */
public final class CardClient {
  private static int checks;

  public static void main(String[] args) throws Exception {
    System.load(new File(args[0]).getAbsolutePath());
    String a = args[1], b = args[2], notADir = args[3];
    String[] roots = {a, b};

    long plan = NativeSpill.createPlan(roots, 100);
    check(plan != 0, "createPlan returns a handle");
    check(empty(a) && empty(b), "createPlan touches no filesystem");
    check(NativeSpill.usedDiskSpace(plan) == 0, "a new plan uses nothing");

    long file = NativeSpill.createTmpFile(plan);
    Path path = Path.of(NativeSpill.path(file));
    Path planDir = path.getParent();
    check(Arrays.asList(a, b).contains(planDir.getParent().toString()), "the plan's dir is directly in a root: " + path);
    check(planDir.getFileName().toString().startsWith("spillway-"), "the plan's dir is spillway-*: " + planDir);
    check(PosixFilePermissions.toString(Files.getPosixFilePermissions(planDir)).equals("rwx------"), "the plan's dir is 0700");
    check(PosixFilePermissions.toString(Files.getPosixFilePermissions(path)).equals("rw-------"), "the file is 0600");

    ByteBuffer heap = ByteBuffer.wrap(new byte[64]);
    ByteBuffer direct = ByteBuffer.allocateDirect(64);
    check(NativeSpill.write(file, heap, 8, 40) == 40, "a heap write returns its length");
    check(NativeSpill.write(file, direct, 0, 60) == 60, "a direct write returns its length");
    check(NativeSpill.usedDiskSpace(plan) == 100 && Files.size(path) == 100, "usage counts the bytes written");
    String limit = thrown(SpillLimitExceededException.class, () -> NativeSpill.write(file, heap, 0, 1));
    check(limit.contains("spark.spillway.maxTempDirectorySize"), "the limit's message names its key: " + limit);
    check(NativeSpill.usedDiskSpace(plan) == 100 && Files.size(path) == 100, "a refused write changes nothing");
    thrown(IllegalArgumentException.class, () -> NativeSpill.write(file, heap, 60, 5));

    NativeSpill.releaseTmpFile(file);
    check(!Files.exists(path) && NativeSpill.usedDiskSpace(plan) == 0, "releaseTmpFile deletes the file and its bytes");
    thrown(IllegalStateException.class, () -> { NativeSpill.releaseTmpFile(file); return null; });

    NativeSpill.releasePlan(plan);
    check(empty(a) && empty(b), "releasePlan removes every dir the plan made");
    thrown(IllegalStateException.class, () -> { NativeSpill.releasePlan(plan); return null; });
    thrown(IllegalStateException.class, () -> NativeSpill.createTmpFile(plan));
    thrown(IllegalStateException.class, () -> NativeSpill.usedDiskSpace(12345));

    thrown(IllegalArgumentException.class, () -> NativeSpill.createPlan(null, 1));
    thrown(IllegalArgumentException.class, () -> NativeSpill.createPlan(new String[0], 1));
    thrown(IllegalArgumentException.class, () -> NativeSpill.createPlan(new String[] {a, null}, 1));
    thrown(IllegalArgumentException.class, () -> NativeSpill.createPlan(new String[] {"relative/dir"}, 1));
    thrown(IllegalArgumentException.class, () -> NativeSpill.createPlan(roots, -1));

    long broken = NativeSpill.createPlan(new String[] {notADir}, 100);
    String io = thrown(IOException.class, () -> NativeSpill.createTmpFile(broken));
    check(io.contains(notADir), "an unusable root is an IOException at the first file, naming it: " + io);
    NativeSpill.releasePlan(broken);
    check(empty(a) && empty(b), "the roots are as they were");
    System.out.println("card client: " + checks + " checks passed");
  }

  private static boolean empty(String dir) {
    String[] entries = new File(dir).list();
    return entries != null && entries.length == 0;
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      System.err.println("card client: FAILED: " + what);
      System.exit(1);
    }
    checks++;
  }

  /** Runs call, which must throw exactly kind (not a subclass, for IOException); returns the message. */
  private static String thrown(Class<? extends Throwable> kind, Callable<?> call) {
    try {
      call.call();
    } catch (Throwable t) {
      check(t.getClass() == kind, "expected " + kind.getName() + ", got " + t);
      return String.valueOf(t.getMessage());
    }
    check(false, "expected " + kind.getName() + ", nothing was thrown");
    return "";
  }
}
