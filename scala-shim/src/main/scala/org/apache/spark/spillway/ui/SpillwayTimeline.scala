package org.apache.spark.spillway.ui

import scala.xml.{Node, NodeSeq}

import org.apache.spark.ui.UIUtils
import org.apache.spark.util.Utils

import spillway.SpillwayExecutorUpdate

/**
 * The Spillway tab's timeline: each executor's bytes spilled (on disk, since its JVM started) over
 * the application's time, as a step line per executor in an inline SVG drawn on the server (no
 * script, so it looks the same live, in the History Server and in a saved page). The
 * [[SpillwayTimeline.MaxLines]] executors that spilled most are drawn; the others are counted
 * under the picture. Each line carries its executor (`data-executor-id`) and its latest bytes
 * (`data-bytes`), its points their time and bytes in `<title>`s.
 */
object SpillwayTimeline {
  /** Executors drawn at most: beyond about ten, lines are no longer told apart. */
  val MaxLines: Int = 10

  private val Width = 900
  private val Height = 220
  private val Left = 80
  private val Right = 220
  private val Top = 10
  private val Bottom = 30
  private val Colors = Seq("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf")

  def render(timelines: Seq[SpillwayExecutorTimelineRow], executors: Seq[SpillwayExecutorUpdate]): NodeSeq = {
    val spilled = timelines.filter(t => t.points.exists(_.bytesSpilled > 0))
    if (spilled.isEmpty) <p id="spillway-no-timeline">No executor has spilled yet.</p>
    else picture(spilled, executors)
  }

  private def picture(spilled: Seq[SpillwayExecutorTimelineRow], executors: Seq[SpillwayExecutorUpdate]): Node = {
    val drawn = spilled.sortBy(t => (-t.points.last.bytesSpilled, t.executorId)).take(MaxLines)
    val lastUpdate = executors.map(e => e.executorId -> e.time).toMap
    val t0 = drawn.map(_.points.head.time).min
    val t1 = math.max(t0 + 1000, (drawn.map(_.points.last.time) ++ drawn.flatMap(t => lastUpdate.get(t.executorId))).max)
    val yMax = math.max(1L, drawn.map(_.points.map(_.bytesSpilled).max).max)
    val plotW = Width - Left - Right
    val plotH = Height - Top - Bottom
    def x(t: Long): Double = Left + (t - t0).toDouble / (t1 - t0) * plotW
    def y(b: Long): Double = Top + plotH - b.toDouble / yMax * plotH
    def xy(t: Long, b: Long): String = f"${x(t)}%.1f,${y(b)}%.1f"

    val lines = drawn.zipWithIndex.map { case (t, i) =>
      val color = Colors(i % Colors.size)
      val end = math.max(t.points.last.time, lastUpdate.getOrElse(t.executorId, t.points.last.time))
      val steps = t.points.zip(t.points.head +: t.points.init).flatMap { case (p, prev) =>
        Seq(xy(p.time, prev.bytesSpilled), xy(p.time, p.bytesSpilled))
      } :+ xy(end, t.points.last.bytesSpilled)
      <g class="spillway-timeline-executor" data-executor-id={t.executorId}>
        <polyline class="spillway-timeline-line" data-executor-id={t.executorId}
                  data-bytes={t.points.last.bytesSpilled.toString} points={steps.mkString(" ")}
                  fill="none" stroke={color} stroke-width="2"/>
        {t.points.map(p =>
          <circle cx={f"${x(p.time)}%.1f"} cy={f"${y(p.bytesSpilled)}%.1f"} r="2.5" fill={color}>
            <title>{s"executor ${t.executorId}, ${UIUtils.formatDate(p.time)}: ${Utils.bytesToString(p.bytesSpilled)} spilled"}</title>
          </circle>)}
        <rect x={(Width - Right + 15).toString} y={(Top + 4 + i * 18).toString} width="12" height="12" fill={color}/>
        <text x={(Width - Right + 32).toString} y={(Top + 14 + i * 18).toString} font-size="12">{
          s"${t.executorId}: ${Utils.bytesToString(t.points.last.bytesSpilled)}"}</text>
      </g>
    }
    val axis = "#6c757d"
    <div id="spillway-timeline">
      <svg xmlns="http://www.w3.org/2000/svg" width={Width.toString} height={Height.toString}
           viewBox={s"0 0 $Width $Height"} role="img" aria-label="Bytes spilled per executor over time"
           data-start={t0.toString} data-end={t1.toString} data-max-bytes={yMax.toString}>
        <line x1={Left.toString} y1={(Top + plotH).toString} x2={(Left + plotW).toString} y2={(Top + plotH).toString} stroke={axis}/>
        <line x1={Left.toString} y1={Top.toString} x2={Left.toString} y2={(Top + plotH).toString} stroke={axis}/>
        <line x1={Left.toString} y1={Top.toString} x2={(Left + plotW).toString} y2={Top.toString} stroke="#e9ecef"/>
        <text x={(Left - 6).toString} y={(Top + 10).toString} font-size="11" text-anchor="end" class="y-max">{Utils.bytesToString(yMax)}</text>
        <text x={(Left - 6).toString} y={(Top + plotH).toString} font-size="11" text-anchor="end">0</text>
        <text x={Left.toString} y={(Height - 8).toString} font-size="11">{UIUtils.formatDate(t0)}</text>
        <text x={(Left + plotW).toString} y={(Height - 8).toString} font-size="11" text-anchor="end">{
          s"${UIUtils.formatDate(t1)} (+${UIUtils.formatDuration(t1 - t0)})"}</text>
        {lines}
      </svg>
      {if (spilled.size > drawn.size)
        <p class="spillway-timeline-more">{s"The ${drawn.size} executors that spilled most; ${spilled.size - drawn.size} more spilled less."}</p>
      else NodeSeq.Empty}
    </div>
  }
}
