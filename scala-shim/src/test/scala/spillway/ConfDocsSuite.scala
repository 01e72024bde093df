package spillway

import java.nio.file.Files

import org.scalatest.funsuite.AnyFunSuite

/**
 * The configuration page as committed is what the settings' declarations generate ([[ConfDocs]]):
 * a setting added, changed or removed in SpillwayConf without `make docs` fails here.
 */
class ConfDocsSuite extends AnyFunSuite {
  test("docs/user-guide/configuration.md is what SpillwayConf's declarations generate") {
    val path = ConfDocs.repoRoot.resolve(ConfDocs.PagePath)
    assert(Files.isRegularFile(path), s"${ConfDocs.PagePath} is missing: run `make docs`")
    val committed = ConfDocs.read(path)
    assert(committed.contains(ConfDocs.Begin) && committed.contains(ConfDocs.End),
      s"${ConfDocs.PagePath} has lost its markers (${ConfDocs.Begin} ... ${ConfDocs.End}): put them back, then run `make docs`")
    val generated = ConfDocs.render(committed)
    if (committed != generated) {
      val (was, want) = committed.linesIterator.toSeq.zipAll(generated.linesIterator.toSeq, "", "")
        .find { case (a, b) => a != b }.getOrElse(("", ""))
      fail(s"${ConfDocs.PagePath} is not what SpillwayConf's declarations generate: run `make docs` and commit the " +
        s"page (first difference: the page has\n  $was\nwhere the declarations give\n  $want)")
    }
  }

  test("the page lists every setting and every Spark key Spillway follows, each once, and only those") {
    val generated = ConfDocs.generated
    for (s <- SpillwayConf.Settings ++ SpillwayConf.SparkKeys) {
      assert(generated.linesIterator.count(_.startsWith(s"| `${s.key}` |")) == 1, s.key)
    }
    assert(generated.linesIterator.count(_.startsWith("| `")) == SpillwayConf.Settings.size + SpillwayConf.SparkKeys.size)
  }

  test("rendering keeps the hand-written text around the markers and is stable") {
    val page = s"# Title\n\nIntro.\n\n${ConfDocs.Begin}\nstale\n${ConfDocs.End}\n\nAfter.\n"
    val once = ConfDocs.render(page)
    assert(once.startsWith(s"# Title\n\nIntro.\n\n${ConfDocs.Begin}\n| key |") && once.endsWith(s"${ConfDocs.End}\n\nAfter.\n"))
    assert(!once.contains("stale"))
    assert(ConfDocs.render(once) == once)
    intercept[IllegalArgumentException](ConfDocs.render("# no markers\n"))
  }
}
