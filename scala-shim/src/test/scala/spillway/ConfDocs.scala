package spillway

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

import spillway.SpillwayConf.{Scope, Setting}

/**
 * Generates the configuration page (docs/user-guide/configuration.md) from the settings'
 * declarations in [[SpillwayConf]]: between its markers, the table of every `spark.spillway.*`
 * setting (key, default, scope, meaning), the scopes' legend and the Spark keys Spillway follows.
 * The rest of the page is kept by hand. `make docs` runs it; [[ConfDocsSuite]] fails when the
 * committed page is not what it generates.
 *
 * Usage: ConfDocs <page> (written in place; created with a title if missing).
 */
object ConfDocs {
  /** The page, from the repository's root. */
  val PagePath: String = "docs/user-guide/configuration.md"

  val Begin: String = "<!-- BEGIN GENERATED: spillway configuration -->"
  val End: String = "<!-- END GENERATED -->"

  /** The page with its generated part rendered afresh from the declarations, the rest of `page` kept. */
  def render(page: String): String = {
    val begin = page.indexOf(Begin)
    val end = page.indexOf(End)
    require(begin >= 0 && end > begin, s"the page has no $Begin ... $End section to generate")
    page.substring(0, begin) + Begin + "\n" + generated + End + page.substring(end + End.length)
  }

  /** The generated part, between the markers. */
  def generated: String = {
    val settings = SpillwayConf.Settings
    val scopes = Scope.All.filter(s => settings.exists(_.scope == s))
    val lines = Seq(
      "| key | default | scope | meaning |",
      "|---|---|---|---|") ++
      settings.map(s => row(code(s.key), s.defaultDoc, s.scope.name, meaning(s))) ++
      Seq("", "**Scopes.**", "") ++
      scopes.map(s => s"- **${s.name}**: ${s.meaning}") ++
      Seq("",
        "## The Spark keys Spillway follows",
        "",
        "Spark's own settings, written and checked as for Spark unless said otherwise; Spillway reads them once per " +
          "executor, from the Spark conf, when its first plan is created.",
        "",
        "| key | Spark's default | what Spillway does with it |",
        "|---|---|---|") ++
      SpillwayConf.SparkKeys.map(s => row(code(s.key), s.defaultDoc, s.doc))
    lines.mkString("", "\n", "\n")
  }

  private def meaning(s: Setting[_]): String = s"${s.doc} Value: ${s.valueType.describe}."

  private def code(text: String): String = s"`$text`"

  private def row(cells: String*): String = cells.map(_.replace("|", "\\|")).mkString("| ", " | ", " |")

  /** The repository's root: the nearest directory above the working directory with build.sbt and project/spark-lines. */
  def repoRoot: Path =
    Iterator.iterate(Paths.get("").toAbsolutePath)(_.getParent).takeWhile(_ != null)
      .find(d => Files.isRegularFile(d.resolve("build.sbt")) && Files.isRegularFile(d.resolve("project/spark-lines")))
      .getOrElse(throw new IllegalStateException("no build.sbt and project/spark-lines above the working directory"))

  def read(path: Path): String = new String(Files.readAllBytes(path), StandardCharsets.UTF_8)

  def main(args: Array[String]): Unit = {
    val path = args match {
      case Array(p) => Paths.get(p)
      case _ =>
        System.err.println("usage: ConfDocs <page> (the repository's is docs/user-guide/configuration.md)")
        sys.exit(2)
    }
    val page = if (Files.isRegularFile(path)) read(path) else s"# Configuration\n\n$Begin\n$End\n"
    val next = render(page)
    if (next == page) println(s"$path: up to date")
    else {
      Files.write(path, next.getBytes(StandardCharsets.UTF_8))
      println(s"$path: written from SpillwayConf's declarations")
    }
  }
}
