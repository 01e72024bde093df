package spillway.sql

import java.util.concurrent.atomic.AtomicBoolean

import scala.util.Try

import org.apache.spark.sql.{Dataset, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import spillway.{SparkLine, SpillwayConf}

/**
 * Replaces each `SortExec` whose keys [[SortKeyEncoder]] can encode with a [[SpillwaySortExec]];
 * leaves the others to Spark, with a log line naming the sort and why (at INFO, or WARN with
 * `spark.spillway.sql.sort.logFallbacks`), and the why as a tag on the `SortExec`. The tags are
 * rendered in one place, [[SpillwaySortRule.fallbacks]]: for `explain` and the SQL tab on Spark
 * 4.0 and later (`SpillwayExplainInfo`) and for any caller, PySpark's included
 * ([[SpillwaySortRule.fallbacksOf]]). Does nothing when `spark.spillway.sql.sort.enabled` is false
 * in the session.
 */
final case class SpillwaySortRule(session: SparkSession, phase: SpillwaySortRule.Phase = SpillwaySortRule.Phase.PreColumnar)
    extends Rule[SparkPlan] {
  // Whether this injection point replaces sorts depends on spark.sql.extensions, a static conf:
  // fixed for the session, so read once rather than on every plan (the SparkContext's conf is
  // copied to read it).
  private lazy val replacesHere = phase.replacesIn(session)

  override def apply(plan: SparkPlan): SparkPlan = {
    // A typo set in this session (`spark.conf.set`, `SET`): told once per JVM, even with no plugin.
    SpillwayConf.unknownKeyWarningsOnce(session.conf.getAll.keys).foreach(w => SpillwaySortRule.log.warn(s"Spillway: $w"))
    SpillwaySortRule.explainProvidersWarningOnce(session.conf.getOption(SpillwaySortRule.ExplainProvidersKey))
      .foreach(w => SpillwaySortRule.log.warn(s"Spillway: $w"))
    if (!SpillwaySortRule.enabled(session) || !replacesHere) plan
    else {
      SpillwaySortRule.logNewFallbacks(plan, atWarn = SpillwaySortRule.logFallbacks(session))
      plan.transformUp {
        case native: SpillwaySortExec => native // a SortExec too: already replaced (the rule runs twice)
        case sort: SortExec =>
          SpillwaySortRule.fallbackReason(sort) match {
            case None =>
              val replaced = SpillwaySortExec(sort.sortOrder, sort.global, sort.child)
              replaced.copyTagsFrom(sort) // the logical link adaptive execution re-plans from
              replaced
            case Some(reason) =>
              // Explain prints SortExec as Spark renders it: the tag is how the plan itself says why.
              sort.setTagValue(SpillwaySortRule.FallbackReason, reason)
              sort
          }
      }
    }
  }
}

object SpillwaySortRule extends AdaptiveSparkPlanHelper {
  private[sql] lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwaySortRule])

  /**
   * Where in Spark's planning an injection of the rule runs, and whether it replaces sorts there.
   * In a session without a native engine, the query-stage preparation and pre-columnar points do
   * (the native sorts show in `explain()` before the query runs). In a session with one
   * ([[nativeEngineIn]]), only the post-columnar point does: the engine's rules run at the same
   * two points as Spillway's, in the order of `spark.sql.extensions`, and Comet looks its operators
   * up by exact class, so a sort replaced before Comet has seen it would be one Comet cannot run.
   */
  sealed abstract class Phase(val name: String) {
    def replacesIn(session: SparkSession): Boolean = this match {
      case Phase.PostColumnar => nativeEngineIn(session)
      case _ => !nativeEngineIn(session)
    }
  }

  object Phase {
    case object QueryStagePrep extends Phase("query stage preparation")
    case object PreColumnar extends Phase("pre-columnar")
    case object PostColumnar extends Phase("post-columnar")
  }

  /** The session extensions of native engines that take Spark's sorts over: Apache DataFusion Comet's. */
  val NativeEngineExtensions: Set[String] = Set("org.apache.comet.CometSparkSessionExtensions")

  /**
   * Whether `session` has a native engine's extension ([[NativeEngineExtensions]]) in
   * `spark.sql.extensions`, as given or as the engine's plugin added it (Comet's adds its own, last,
   * to the SparkContext's conf). Known by class name: Spillway has no dependency on the engine.
   */
  def nativeEngineIn(session: SparkSession): Boolean = {
    val listed = session.sparkContext.getConf.getOption(ExtensionsKey).toSeq ++ session.conf.getOption(ExtensionsKey)
    listed.flatMap(_.split(",")).map(_.trim).exists(NativeEngineExtensions.contains)
  }

  val ExtensionsKey: String = "spark.sql.extensions"

  /** On a `SortExec` the rule left to Spark: why the native sort could not run it. */
  val FallbackReason: TreeNodeTag[String] = TreeNodeTag[String]("spillway.sort.fallbackReason")

  /**
   * The sorts of `plan` (an executed plan: `df.queryExecution.executedPlan`) that Spark's sort runs
   * because the native sort cannot: each as its keys in SQL (`i ASC NULLS FIRST, arr DESC NULLS
   * LAST`) and the reason. Looks inside adaptive plans (the final plan and its query stages, once
   * the query has run; the initial plan before) and subqueries.
   */
  def fallbacks(plan: SparkPlan): Seq[(String, String)] =
    collectWithSubqueries(plan) {
      case sort: SortExec if sort.getTagValue(FallbackReason).isDefined => keys(sort) -> sort.getTagValue(FallbackReason).get
    }

  /**
   * The sorts of `df`'s query that Spark's sort runs because the native sort cannot, one line each,
   * as [[describe]] writes them: `Sort [t.i ASC NULLS FIRST, t.arr DESC NULLS LAST] runs as Spark's
   * sort: key t.arr: nested type array<int> (only atomic types are encoded)`. Empty when every sort
   * runs natively, when `spark.spillway.sql.sort.enabled` is false, or without the extension.
   *
   * The stable way to ask from any language on every Spark line, Spark 3.5 included (which has no
   * explain providers): from PySpark, `spark._jvm.spillway.sql.SpillwaySortRule.fallbacksOf(df._jdf)`
   * (plain strings, an array py4j lets Python iterate). Plans the query if it is not planned yet
   * and never runs it: before the query has run, adaptive execution's initial plan is listed; after
   * it has run, the plan as it ran (sorts that adaptive execution added on the way included).
   * Safe to call any number of times.
   */
  def fallbacksOf(df: Dataset[_]): Array[String] = fallbackLines(df.queryExecution.executedPlan).toArray

  /** [[fallbacks]] of `plan`, one line each as [[describe]] writes them: what `explain` shows (`SpillwayExplainInfo`). */
  def fallbackLines(plan: SparkPlan): Seq[String] = fallbacks(plan).map { case (k, r) => describe(k, r) }

  /** The one line for a sort left to Spark: its keys in SQL and the reason, as logged and listed. */
  def describe(keys: String, reason: String): String = s"Sort [$keys] runs as Spark's sort: $reason"

  /** On a logical plan node: the fallback lines logged for the physical sorts planned under it. */
  private val FallbacksLogged: TreeNodeTag[Set[String]] = TreeNodeTag[Set[String]]("spillway.sort.fallbacksLogged")

  /**
   * Logs the line of each sort in `plan` that must stay Spark's, once per query. The rule meets a
   * query's sorts more than once: a second time as its second injection (the sorts are tagged by
   * then), and as fresh `SortExec`s each time adaptive execution plans the rest of the query again
   * from its logical plan, which keeps its nodes' tags. So the logical node a sort was planned from
   * remembers the lines told for it: the sort's own logical link (an ORDER BY), or for a sort
   * `EnsureRequirements` added, which has none, the nearest ancestor's (a sort-merge join's join).
   */
  private def logNewFallbacks(plan: SparkPlan, atWarn: Boolean): Unit = {
    def visit(node: SparkPlan, inherited: Option[LogicalPlan]): Unit = {
      val logical = node.logicalLink.orElse(inherited)
      node match {
        case sort: SortExec if sort.getTagValue(FallbackReason).isEmpty =>
          fallbackReason(sort).map(describe(keys(sort), _)).filter(line => logical.forall(firstTelling(_, line))).foreach { line =>
            if (atWarn) log.warn(s"Spillway: $line") else log.info(s"Spillway: $line")
          }
        case _ =>
      }
      node.children.foreach(visit(_, logical))
    }
    visit(plan, None)
  }

  /** Records `line` as told on `logical`; whether it had not been. */
  private def firstTelling(logical: LogicalPlan, line: String): Boolean = {
    val told = logical.getTagValue(FallbacksLogged).getOrElse(Set.empty[String])
    if (told.contains(line)) false
    else {
      logical.setTagValue(FallbacksLogged, told + line)
      true
    }
  }

  private def keys(sort: SortExec): String = sort.sortOrder.map(_.sql).mkString(", ")

  val EnabledKey: String = SpillwayConf.SqlSortEnabledKey
  val LogFallbacksKey: String = SpillwayConf.SqlSortLogFallbacksKey

  /** Spark's setting (4.0 and later) that lists the explain providers. */
  val ExplainProvidersKey: String = "spark.sql.extendedExplainProviders"

  /** The explain provider, in the jars of the Spark lines that have explain providers (4.0 and later) only. */
  val ExplainInfoClass: String = "spillway.sql.SpillwayExplainInfo"

  private lazy val explainInfoInJar: Boolean =
    Try(Class.forName(ExplainInfoClass, false, classOf[SpillwaySortRule].getClassLoader)).isSuccess

  private val explainProvidersWarned = new AtomicBoolean

  /**
   * The warning for `providers` (the value of `spark.sql.extendedExplainProviders`) naming
   * [[ExplainInfoClass]] on a Spark line whose jar has no such class (3.5: Spark ignores the
   * setting there), the first time this JVM sees it; None otherwise.
   */
  private[sql] def explainProvidersWarningOnce(providers: Option[String]): Option[String] =
    explainProvidersWarning(providers).filter(_ => explainProvidersWarned.compareAndSet(false, true))

  private[sql] def explainProvidersWarning(providers: Option[String]): Option[String] =
    providers.filter(p => !explainInfoInJar && p.split(",").exists(_.trim == ExplainInfoClass)).map { _ =>
      s"$ExplainProvidersKey names $ExplainInfoClass, but Spark ${SparkLine.builtSparkLine()} has no explain " +
        s"providers and ignores the setting (the class is in the jars for Spark 4.0 and later): list the sorts left " +
        s"to Spark's sort with spillway.sql.SpillwaySortRule.fallbacksOf(df), or set $LogFallbacksKey=true to log each at WARN"
    }

  /**
   * Whether the session runs eligible sorts natively: `spark.spillway.sql.sort.enabled`, `true`
   * unless set.
   *
   * @throws IllegalArgumentException for a value other than true or false
   */
  def enabled(session: SparkSession): Boolean = SpillwayConf.SqlSortEnabled.in(session)

  /**
   * Whether the session logs each sort left to Spark's sort at WARN (else INFO):
   * `spark.spillway.sql.sort.logFallbacks`, `false` unless set.
   *
   * @throws IllegalArgumentException for a value other than true or false
   */
  def logFallbacks(session: SparkSession): Boolean = SpillwayConf.SqlSortLogFallbacks.in(session)

  /** Why `sort` must stay Spark's, or None if the native sort can run it. */
  def fallbackReason(sort: SortExec): Option[String] =
    sort.sortOrder.iterator
      .map(o => SortKeyEncoder.unsupportedReason(o.dataType).map(r => s"key ${o.child.sql}: $r"))
      .collectFirst { case Some(r) => r }
}
