package spillway

import scala.collection.mutable

import org.apache.spark.scheduler.{SparkListener, SparkListenerApplicationEnd, SparkListenerStageCompleted}

/**
 * The driver's sums of the executors' [[TaskSpillReport]]s, one per stage attempt and executor,
 * posted as a [[SpillwayStageSpills]] event when the stage attempt completes (and the rest when the
 * application ends). A report for a stage attempt that has completed already is posted as it is.
 *
 * What it holds: one sum per stage attempt and executor that spilled and is still running, and the
 * keys of the last [[CompletedKept]] stage attempts that completed, nothing per plan or task.
 */
final class StageSpillSums(post: SpillwayEvent => Unit) extends SparkListener {
  import StageSpillSums._

  private val sums = mutable.LinkedHashMap.empty[(Int, Int, String), SpillwayStageSpills]
  private val completed = mutable.LinkedHashSet.empty[(Int, Int)]

  def add(spills: SpillwayStageSpills): Unit = {
    val stage = (spills.stageId, spills.stageAttemptId)
    val late = synchronized {
      if (completed.contains(stage)) true
      else {
        val key = (spills.stageId, spills.stageAttemptId, spills.executorId)
        sums.update(key, sums.get(key).fold(spills)(_ + spills))
        false
      }
    }
    if (late) post(spills)
  }

  override def onStageCompleted(event: SparkListenerStageCompleted): Unit = {
    val stage = (event.stageInfo.stageId, event.stageInfo.attemptNumber())
    val done = synchronized {
      completed += stage
      if (completed.size > CompletedKept) completed -= completed.head
      val keys = sums.keys.filter(k => (k._1, k._2) == stage).toList
      keys.flatMap(sums.remove)
    }
    done.foreach(post)
  }

  override def onApplicationEnd(event: SparkListenerApplicationEnd): Unit = {
    val rest = synchronized {
      val all = sums.values.toList
      sums.clear()
      all
    }
    rest.foreach(post)
  }
}

object StageSpillSums {
  /** Completed stage attempts remembered, to post their late reports at once. */
  val CompletedKept: Int = 10000
}
