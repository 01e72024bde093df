package spillway.demo

import scala.reflect.ClassTag

import org.apache.spark.{BarrierTaskContext, SparkContext}
import org.apache.spark.spillway.demo.ExecutorIds

/** The cluster applications' ways to wait for their executors and to run a task on each. */
object ClusterExecutors {
  /** A bound on waiting for executors, not a measurement. */
  val WaitMillis: Long = 180L * 1000

  /**
   * Waits (bounded) until `n` executors are registered, and if `replacing` is not empty, until one
   * of them is not in `replacing` (a replacement has come); returns their ids.
   */
  def await(sc: SparkContext, n: Int, replacing: Seq[String] = Nil): Seq[String] = {
    val deadline = System.currentTimeMillis() + WaitMillis
    def current: Seq[String] = ExecutorIds(sc).sorted
    def ready(ids: Seq[String]) = ids.size >= n && (replacing.isEmpty || ids.exists(id => !replacing.contains(id)))
    while (!ready(current)) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException(s"waited ${WaitMillis / 1000} s for $n executors" +
          (if (replacing.nonEmpty) s" replacing one of ${replacing.mkString(", ")}" else "") + s"; have ${current.mkString(", ")}")
      }
      Thread.sleep(200)
    }
    current
  }

  /**
   * Runs `body` once on each of `n` single-core executors: a barrier stage of `n` tasks is
   * launched all at once, one task per free core, so each executor runs exactly one. The results
   * come in the order of the tasks, not of the executors.
   */
  def onEach[T: ClassTag](sc: SparkContext, n: Int)(body: () => T): Seq[T] =
    sc.parallelize(0 until n, n).barrier().mapPartitions { _ =>
      val r = body()
      BarrierTaskContext.get().barrier() // hold every slot until all ran: no executor runs two
      Iterator(r)
    }.collect().toSeq
}
