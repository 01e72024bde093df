package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.file.Path

import org.scalatest.funsuite.AnyFunSuite

/**
 * Local dirs that fill up and empty again, on real tmpfs mounts, through the JNI contract as a
 * caller sees it: createTmpFile then a 64 KiB write. A full dir beside one with room never gets a
 * new file; a dir that filled takes files again once space returns.
 */
class FullLocalDirSuite extends AnyFunSuite {
  private val Spill = ByteBuffer.allocateDirect(64 << 10)

  private def spill(plan: Long): Long = {
    val file = NativeSpill.createTmpFile(plan)
    assert(NativeSpill.write(file, Spill, 0, Spill.capacity) == Spill.capacity)
    file
  }

  private def under(root: Path, file: Long): Boolean = NativeSpill.path(file).startsWith(root.toString + "/")

  test("beside a full local dir, every spill succeeds in the one with room, with exact accounting") {
    NativeLoader.load()
    RealMounts.withTmpfs("size=4m") { full =>
      RealMounts.withTmpfs("size=8m") { good =>
        RealMounts.fill(full.resolve("ballast"))
        val plan = NativeSpill.createPlan(Array(full.toString, good.toString), 1L << 30)
        try {
          val files = (1 to 16).map(_ => spill(plan))
          assert(files.forall(under(good, _)), files.map(NativeSpill.path))
          assert(NativeSpill.usedDiskSpace(plan) == 16L * Spill.capacity)
          assert(TestFiles.spillDirsUnder(Seq(full.toString)).isEmpty, "no plan dir on the full dir")
        } finally NativeSpill.releasePlan(plan)
        assert(TestFiles.spillDirsUnder(Seq(full.toString, good.toString)).isEmpty)
      }
    }
  }

  test("the only local dir fills, then the plan frees space: createTmpFile works again at once") {
    NativeLoader.load()
    RealMounts.withTmpfs("size=4m") { root =>
      val plan = NativeSpill.createPlan(Array(root.toString), 1L << 30)
      try {
        val first = NativeSpill.createTmpFile(plan)
        val mib = ByteBuffer.allocateDirect(1 << 20)
        assert(NativeSpill.write(first, mib, 0, mib.capacity) == mib.capacity)
        val filler = NativeSpill.createTmpFile(plan)
        val failed = intercept[IOException] {
          while (true) NativeSpill.write(filler, mib, 0, mib.capacity)
        }
        assert(failed.getMessage.contains("no space left on device"), failed.getMessage)
        val noRoom = intercept[IOException](NativeSpill.createTmpFile(plan))
        assert(noRoom.getMessage.contains("no local dir could take a spill file"), noRoom.getMessage)
        assert(noRoom.getMessage.contains(root.toString), noRoom.getMessage)
        val before = NativeSpill.usedDiskSpace(plan)

        NativeSpill.releaseTmpFile(filler) // frees about 3 MiB
        NativeSpill.releaseTmpFile(first)
        val again = (1 to 8).map(_ => spill(plan))
        assert(again.forall(under(root, _)))
        assert(NativeSpill.usedDiskSpace(plan) == 8L * Spill.capacity, s"was $before before the releases")
      } finally NativeSpill.releasePlan(plan)
      assert(TestFiles.spillDirsUnder(Seq(root.toString)).isEmpty)
    }
  }
}
