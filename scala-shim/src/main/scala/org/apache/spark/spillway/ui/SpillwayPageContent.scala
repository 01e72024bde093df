package org.apache.spark.spillway.ui

import scala.xml.{Node, NodeSeq}

import org.apache.spark.util.Utils

import spillway.{SpillwayExecutorUpdate, SpillwayLocalDir}

/**
 * The Spillway tab's body from a [[SpillwayView]]: a table of SQL queries (linked to the SQL tab's
 * page of each, under `uiRoot`) and one of executors (each local dir as a bar of used and free
 * bytes, full ones marked; bytes in use and their peak against the executor's limit). Sizes show as
 * Spark shows them, each cell with its exact bytes in `data-bytes`. No request type appears here:
 * the per-line `SpillwayPage` passes the request's parts in.
 */
object SpillwayPageContent {
  def render(view: SpillwayView, uiRoot: String): Seq[Node] =
    <div id="spillway">
      <h4>SQL queries</h4>
      {queries(view, uiRoot)}
      <h4>Executors</h4>
      {executors(view.executors)}
      <p><a href={s"$uiRoot/spillway/json"}>The same as JSON</a></p>
    </div>

  private def queries(view: SpillwayView, uiRoot: String): NodeSeq = {
    val qs = view.queries
    if (qs.isEmpty) <p id="spillway-no-queries">No SQL query has run a native sort, left a sort to Spark or spilled through Spillway.</p>
    else
      <table id="spillway-queries" class="table table-bordered table-sm table-striped">
        <thead><tr>
          <th>Query</th><th>Native sorts</th><th>Sorts left to Spark</th><th>Plans spilled</th><th>Spill files</th>
          <th>Sort runs</th><th>Spilled (before compression)</th><th>Spilled (on disk)</th><th>Local dirs used</th>
        </tr></thead>
        <tbody>{qs.map { q =>
          <tr data-execution-id={q.executionId.toString}>
            <td class="query"><a href={s"$uiRoot/SQL/execution/?id=${q.executionId}"}>{q.executionId}</a></td>
            <td class="native-sorts">{q.nativeSorts}</td>
            <td class="fallbacks">{
              if (q.fallbacks.isEmpty) NodeSeq.Empty
              else <ul class="list-unstyled mb-0">{q.fallbacks.map(f =>
                <li class="fallback">Sort [<span class="fallback-keys">{f.keys}</span>]: <span class="fallback-reason">{f.reason}</span></li>)}</ul>
            }</td>
            <td class="plans-spilled">{q.plans}</td>
            <td class="files">{q.files}</td>
            <td class="sort-runs">{q.sortRuns}</td>
            {bytesCell("logical-bytes", q.logicalBytes)}
            {bytesCell("disk-bytes", q.diskBytes)}
            <td class="local-dirs">{q.localDirs.mkString(", ")}</td>
          </tr>
        }}</tbody>
      </table>
  }

  private def executors(es: Seq[SpillwayExecutorUpdate]): NodeSeq =
    if (es.isEmpty) <p id="spillway-no-executors">No executor has reported yet.</p>
    else
      <table id="spillway-executors" class="table table-bordered table-sm table-striped">
        <thead><tr>
          <th>Executor</th><th>Local dirs (used and free)</th><th>In spill files now, peak, executor limit</th>
          <th>Plan limit</th><th>Orphans swept</th><th>Plans created</th><th>Plans spilled</th><th>Spill files</th>
          <th>Spilled (on disk)</th><th>Limit failures</th><th>Filesystem errors</th><th>Updated</th>
        </tr></thead>
        <tbody>{es.map { e =>
          <tr data-executor-id={e.executorId}>
            <td class="executor">{e.executorId}{if (e.host.nonEmpty) s" (${e.host})" else ""}{if (e.atStop) " stopped" else ""}</td>
            <td class="local-dirs">{e.localDirs.map(dir)}</td>
            <td class="budget" data-bytes={e.bytesInUse.toString} data-peak-bytes={e.peakBytesInUse.toString}
                data-limit-bytes={limitAttr(e.executorLimit)}>{budget(e)}</td>
            <td class="plan-limit" data-limit-bytes={limitAttr(e.planLimit)}>{limitText(e.planLimit)}</td>
            <td class="orphans-swept">{e.orphansSwept}</td>
            <td class="plans-created">{e.plansCreated}</td>
            <td class="plans-spilled">{e.plansSpilled}</td>
            <td class="files">{e.spillFiles}</td>
            {bytesCell("disk-bytes", e.bytesSpilled)}
            <td class="limit-failures">{e.limitFailures}</td>
            <td class="filesystem-errors">{e.filesystemErrors}</td>
            <td class="updated">{org.apache.spark.ui.UIUtils.formatDate(e.time)}</td>
          </tr>
        }}</tbody>
      </table>

  private def dir(d: SpillwayLocalDir): Node = {
    val used = math.max(0L, d.totalBytes - d.freeBytes)
    val pct = if (d.totalBytes > 0) used * 100.0 / d.totalBytes else 0.0
    <div class="spillway-dir" data-path={d.path} data-total-bytes={d.totalBytes.toString}
         data-free-bytes={d.freeBytes.toString} data-full={d.full.toString}>
      <div><code>{d.path}</code>{if (d.full) <span class="badge badge-danger bg-danger spillway-full">full</span> else NodeSeq.Empty}</div>
      {bar(pct, if (d.full) "#dc3545" else "#5b9bd5", s"${Utils.bytesToString(used)} used")}
      <small class="dir-free">{Utils.bytesToString(d.freeBytes)} free of {Utils.bytesToString(d.totalBytes)}</small>
    </div>
  }

  private def budget(e: SpillwayExecutorUpdate): NodeSeq = {
    val text = <span class="in-use">{Utils.bytesToString(e.bytesInUse)}</span> ++ scala.xml.Text(", peak ") ++
      <span class="peak">{Utils.bytesToString(e.peakBytesInUse)}</span> ++ scala.xml.Text(", limit ") ++
      <span class="limit">{limitText(e.executorLimit)}</span>
    if (e.executorLimit == Long.MaxValue || e.executorLimit <= 0) text
    else bar(e.peakBytesInUse * 100.0 / e.executorLimit, "#f0ad4e", "peak") ++ text
  }

  private def bar(percent: Double, color: String, label: String): Node = {
    val width = f"${math.min(100.0, math.max(0.0, percent))}%.1f%%"
    <div class="spillway-bar" title={label} style="height: 10px; background: #e9ecef; border-radius: 3px; margin: 2px 0; min-width: 120px;">
      <div class="spillway-bar-used" style={s"height: 100%; width: $width; background: $color; border-radius: 3px;"}></div>
    </div>
  }

  private def bytesCell(cls: String, bytes: Long): Node =
    <td class={cls} data-bytes={bytes.toString} sorttable_customkey={bytes.toString}>{Utils.bytesToString(bytes)}</td>

  private def limitText(bytes: Long): String = if (bytes == Long.MaxValue) "unlimited" else Utils.bytesToString(bytes)

  private def limitAttr(bytes: Long): String = if (bytes == Long.MaxValue) "unlimited" else bytes.toString
}
