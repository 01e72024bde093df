package spillway

import java.io.{File, StringWriter}
import java.net.URLClassLoader
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}
import javax.tools.ToolProvider

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

/**
 * The README's Java example, as a user would write it: extracted from README.md (between the
 * `readme-java` markers), compiled with javac against this build's classes, and run inside a
 * Spark task. The public API must be usable from Java as documented.
 */
class ReadmeJavaSuite extends AnyFunSuite with LocalSpark {
  private def readme: Path = {
    val dir = Iterator.iterate(Paths.get("").toAbsolutePath)(_.getParent).takeWhile(_ != null)
      .find(d => Files.isRegularFile(d.resolve("README.md")) && Files.isRegularFile(d.resolve("build.sbt")))
    dir.getOrElse(fail("no README.md above the working directory")).resolve("README.md")
  }

  private def javaExample: String = {
    val text = new String(Files.readAllBytes(readme), StandardCharsets.UTF_8)
    val block = """(?s)<!-- readme-java:begin -->\s*```java\n(.*?)```\s*<!-- readme-java:end -->""".r
    block.findFirstMatchIn(text).map(_.group(1)).getOrElse(fail("README.md has no readme-java block"))
  }

  test("the README's Java example compiles with javac and spills and reads back in a Spark task") {
    val source = javaExample
    val className = """final class (\w+)""".r.findFirstMatchIn(source).map(_.group(1)).getOrElse(fail("no class"))
    val dir = Files.createDirectories(base.resolve("java"))
    val file = Files.write(dir.resolve(s"$className.java"), source.getBytes(StandardCharsets.UTF_8))
    val compiler = ToolProvider.getSystemJavaCompiler
    assert(compiler != null, "no system Java compiler (a JDK is needed)")
    val diagnostics = new StringWriter
    val ok = compiler.getTask(diagnostics, null, null,
      Seq("-classpath", sys.props("java.class.path"), "-d", dir.toString, "-Xlint:all", "-Werror").asJava,
      null, compiler.getStandardFileManager(null, null, StandardCharsets.UTF_8).getJavaFileObjects(file.toFile))
      .call()
    assert(ok, s"javac failed on the README's example:\n$diagnostics")

    val classes = dir.toUri.toURL
    val data = TestFiles.pattern(200 * 1024, 3)
    val back = sc.parallelize(Seq(1), 1).map { _ =>
      val loader = new URLClassLoader(Array(classes), TaskSpill.getClass.getClassLoader)
      val method = loader.loadClass(className).getDeclaredMethod("roundTrip", classOf[Array[Byte]])
      method.setAccessible(true) // the example's class is package-private, as users write them
      method.invoke(null, data).asInstanceOf[Array[Byte]]
    }.collect().head
    assert(back.sameElements(data))
    assert(TestFiles.spillDirsUnder(roots).isEmpty, "the task's plan dir is removed at its end")
    assert(new File(dir.toFile, s"$className.class").isFile)
  }
}
