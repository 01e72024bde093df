package org.apache.spark.spillway.ui

import scala.xml.{Node, NodeSeq}

import org.apache.spark.ui.UIUtils
import org.apache.spark.util.Utils

import spillway.{SpillwayExecutorUpdate, SpillwayLocalDir, SpillwayStageSpills}

/**
 * The Spillway tab's body from a [[SpillwayView]]: a table of SQL queries (linked to the SQL tab's
 * page of each, under `uiRoot`), a timeline of each executor's bytes spilled (an inline SVG drawn
 * here, no script), a table of executors (each local dir as a bar of used and free bytes, full and
 * given-up ones marked; bytes in use and their peak against the executor's limit) and one of stage
 * attempts per executor (linked to the Stages tab's page of each). The tables sort by a click on
 * a header as Spark's own do (Spark's sorttable.js, which every Spark page loads, through
 * `UIUtils.TABLE_CLASS_STRIPED_SORTABLE`), sizes by their bytes. Sizes show as Spark shows them,
 * each cell with its exact bytes in `data-bytes`. No request type appears here: the per-line
 * `SpillwayPage` passes the request's parts in.
 */
object SpillwayPageContent {
  def render(view: SpillwayView, uiRoot: String): Seq[Node] = {
    val executors = view.executors
    <div id="spillway">
      <h4>SQL queries</h4>
      {queries(view, uiRoot)}
      <h4>Bytes spilled per executor</h4>
      {SpillwayTimeline.render(view.timelines, executors)}
      <h4>Executors</h4>
      {executorTable(executors)}
      <h4>Stages</h4>
      {stages(view.stages, uiRoot)}
      <p><a href={s"$uiRoot/spillway/json"}>The same as JSON</a></p>
    </div>
  }

  private def queries(view: SpillwayView, uiRoot: String): NodeSeq = {
    val qs = view.queries
    if (qs.isEmpty) <p id="spillway-no-queries">No SQL query has run a native sort, left a sort to Spark or spilled through Spillway.</p>
    else
      <table id="spillway-queries" class={UIUtils.TABLE_CLASS_STRIPED_SORTABLE}>
        <thead><tr>
          <th>Query</th><th>Native sorts</th><th>Sorts left to Spark</th><th>Plans spilled</th><th>Spill files</th>
          <th>Sort runs</th><th>Spilled (before compression)</th><th>Spilled (on disk)</th><th>Local dirs used</th>
        </tr></thead>
        <tbody>{qs.map { q =>
          <tr data-execution-id={q.executionId.toString}>
            <td class="query" sorttable_customkey={q.executionId.toString}><a href={s"$uiRoot/SQL/execution/?id=${q.executionId}"}>{q.executionId}</a></td>
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

  // The remote tier's columns show once an executor has used it (or retried a call to it).
  private def executorTable(es: Seq[SpillwayExecutorUpdate]): NodeSeq = {
    val remote = es.exists(e => e.remoteSpillFiles > 0 || e.remoteRetries > 0)
    if (es.isEmpty) <p id="spillway-no-executors">No executor has reported yet.</p>
    else
      <table id="spillway-executors" class={UIUtils.TABLE_CLASS_STRIPED_SORTABLE}>
        <thead><tr>
          <th>Executor</th><th>Local dirs (used and free)</th><th>In spill files now, peak, executor limit</th>
          <th>Plan limit</th><th>Orphans swept</th><th>Plans created</th><th>Plans spilled</th><th>Spill files</th>
          <th>Spilled (on disk)</th><th>Limit failures</th><th>Filesystem errors</th>{
          if (remote) <th title="spill files that went to spark.spillway.remote.uri because no local dir could take them">Remote files</th>
            <th>Remote written</th><th>Remote read</th><th title="answers of the object store its client retried with backoff">Remote retries</th>
          else NodeSeq.Empty}<th>Updated</th>
        </tr></thead>
        <tbody>{es.map { e =>
          <tr data-executor-id={e.executorId}>
            <td class="executor">{e.executorId}{if (e.host.nonEmpty) s" (${e.host})" else ""}{if (e.atStop) " stopped" else ""}</td>
            <td class="local-dirs" sorttable_customkey={e.localDirs.count(d => d.full || d.givenUp).toString}>{e.localDirs.map(dir)}</td>
            <td class="budget" data-bytes={e.bytesInUse.toString} data-peak-bytes={e.peakBytesInUse.toString}
                sorttable_customkey={e.peakBytesInUse.toString}
                data-limit-bytes={limitAttr(e.executorLimit)}>{budget(e)}</td>
            <td class="plan-limit" data-limit-bytes={limitAttr(e.planLimit)} sorttable_customkey={e.planLimit.toString}>{limitText(e.planLimit)}</td>
            <td class="orphans-swept">{e.orphansSwept}</td>
            <td class="plans-created">{e.plansCreated}</td>
            <td class="plans-spilled">{e.plansSpilled}</td>
            <td class="files">{e.spillFiles}</td>
            {bytesCell("disk-bytes", e.bytesSpilled)}
            <td class="limit-failures">{e.limitFailures}</td>
            <td class="filesystem-errors">{e.filesystemErrors}</td>{
            if (remote) Seq(<td class="remote-files">{e.remoteSpillFiles}</td>, bytesCell("remote-written", e.remoteBytesSpilled),
              bytesCell("remote-read", e.remoteBytesRead), <td class="remote-retries">{e.remoteRetries}</td>)
            else NodeSeq.Empty}
            <td class="updated" sorttable_customkey={e.time.toString}>{UIUtils.formatDate(e.time)}</td>
          </tr>
        }}</tbody>
      </table>
  }

  private def dir(d: SpillwayLocalDir): Node = {
    val used = math.max(0L, d.totalBytes - d.freeBytes)
    val pct = if (d.totalBytes > 0) used * 100.0 / d.totalBytes else 0.0
    val color = if (d.givenUp) "#6c757d" else if (d.full) "#dc3545" else "#5b9bd5"
    <div class="spillway-dir" data-path={d.path} data-total-bytes={d.totalBytes.toString}
         data-free-bytes={d.freeBytes.toString} data-full={d.full.toString} data-given-up={d.givenUp.toString}
         data-spillway-bytes={d.spillwayBytes.toString}>
      <div><code>{d.path}</code>{
        if (d.full) <span class="badge badge-danger bg-danger spillway-full">full</span> else NodeSeq.Empty}{
        if (d.givenUp) <span class="badge badge-secondary bg-secondary spillway-given-up" title="gone or not writable: plans spill to the other dirs">given up</span>
        else NodeSeq.Empty}</div>
      {bar(pct, color, s"${Utils.bytesToString(used)} used")}
      <small class="dir-free">{Utils.bytesToString(d.freeBytes)} free of {Utils.bytesToString(d.totalBytes)}</small>
      <small class="dir-spillway">{s", ${Utils.bytesToString(d.spillwayBytes)} in Spillway's plan dirs"}</small>
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

  private def stages(ss: Seq[SpillwayStageSpills], uiRoot: String): NodeSeq =
    if (ss.isEmpty) <p id="spillway-no-stages">No stage has spilled through Spillway.</p>
    else
      <table id="spillway-stages" class={UIUtils.TABLE_CLASS_STRIPED_SORTABLE}>
        <thead><tr>
          <th>Stage</th><th>Executor</th><th>Query</th><th>Plans spilled</th><th>Spill files</th><th>Sort runs</th>
          <th>Spilled (before compression)</th><th>Spilled (on disk)</th><th>Local dirs used</th>
        </tr></thead>
        <tbody>{ss.sortBy(s => (-s.stageId, -s.stageAttemptId, s.executorId)).map { s =>
          <tr data-stage-id={s.stageId.toString} data-stage-attempt-id={s.stageAttemptId.toString} data-executor-id={s.executorId}>
            <td class="stage" sorttable_customkey={f"${s.stageId}%010d.${s.stageAttemptId}%05d"}><a href={
              s"$uiRoot/stages/stage/?id=${s.stageId}&attempt=${s.stageAttemptId}"}>{
              if (s.stageAttemptId == 0) s.stageId.toString else s"${s.stageId} (attempt ${s.stageAttemptId})"}</a></td>
            <td class="executor">{s.executorId}</td>
            <td class="query" sorttable_customkey={s.sqlExecutionId.toString}>{
              if (s.sqlExecutionId < 0) NodeSeq.Empty
              else <a href={s"$uiRoot/SQL/execution/?id=${s.sqlExecutionId}"}>{s.sqlExecutionId}</a>}</td>
            <td class="plans-spilled">{s.plans}</td>
            <td class="files">{s.files}</td>
            <td class="sort-runs">{s.sortRuns}</td>
            {bytesCell("logical-bytes", s.logicalBytes)}
            {bytesCell("disk-bytes", s.diskBytes)}
            <td class="local-dirs">{s.localDirs.mkString(", ")}</td>
          </tr>
        }}</tbody>
      </table>

  private def bytesCell(cls: String, bytes: Long): Node =
    <td class={cls} data-bytes={bytes.toString} sorttable_customkey={bytes.toString}>{Utils.bytesToString(bytes)}</td>

  private def limitText(bytes: Long): String = if (bytes == Long.MaxValue) "unlimited" else Utils.bytesToString(bytes)

  private def limitAttr(bytes: Long): String = if (bytes == Long.MaxValue) "unlimited" else bytes.toString
}
