package org.apache.spark.spillway.ui

import jakarta.servlet.http.HttpServletRequest

import scala.xml.Node

import org.json4s.JsonAST.JValue

import org.apache.spark.ui.{UIUtils, WebUIPage}

/**
 * The Spillway tab's page and its JSON (`/spillway/`, `/spillway/json`), for Spark 4.0, whose
 * servlet API is jakarta.servlet: the one thing of Spark's UI that differs between lines. The
 * content is [[SpillwayPageContent]]'s and [[SpillwayView]]'s, the same on every line.
 */
private[ui] final class SpillwayPage(tab: SpillwayTab) extends WebUIPage("") {
  override def render(request: HttpServletRequest): Seq[Node] = {
    val uiRoot = UIUtils.prependBaseUri(request, tab.ui.basePath)
    UIUtils.headerSparkPage(request, "Spillway", SpillwayPageContent.render(tab.view, uiRoot), tab)
  }

  override def renderJson(request: HttpServletRequest): JValue = tab.view.json
}
