#!/usr/bin/env python3
"""Compares two runs of Spark's own suites (project/spark-suites.sh): OFF_DIR and ON_DIR, each
with ScalaTest's JUnit XML reports under junit/. Prints, per suite, the tests run and passed in
each, then every test that passed off and failed (or did not run) on, with its failure message on,
and writes the same as Markdown to report.md beside the two runs. Exits 1 if any test passed off
and not on, 0 otherwise.

Tests listed in KNOWN (project/spark-suites-known: suite, test and reason, tab-separated) are
listed apart with their reason and do not fail the comparison.

Usage: spark_suites_compare.py OFF_DIR ON_DIR [KNOWN]
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET


def load(run_dir):
    """{suite: {test: (status, message)}} of one run; status pass, fail, skip."""
    results = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "junit", "*.xml"))):
        root = ET.parse(path).getroot()
        for suite in root.iter("testsuite"):
            tests = results.setdefault(suite.get("name"), {})
            for case in suite.iter("testcase"):
                status, message = "pass", ""
                for tag in ("failure", "error"):
                    el = case.find(tag)
                    if el is not None:
                        status = "fail"
                        message = (el.get("message") or el.text or "").strip()
                        break
                else:
                    if case.find("skipped") is not None:
                        status = "skip"
                tests[case.get("name")] = (status, message)
    return results


def first_lines(text, n=6, width=400):
    lines = [l.rstrip() for l in text.splitlines() if l.strip()][:n]
    return "\n".join(l if len(l) <= width else l[:width] + " ..." for l in lines)


def main():
    off_dir, on_dir = sys.argv[1], sys.argv[2]
    off, on = load(off_dir), load(on_dir)
    known = {}
    if len(sys.argv) > 3:
        for line in open(sys.argv[3]):
            if line.strip() and not line.startswith("#"):
                suite, test, reason = line.rstrip("\n").split("\t")
                known[(suite, test)] = reason
    suites = sorted(set(off) | set(on))
    rows, regressions, known_seen = [], [], []
    for s in suites:
        o, n = off.get(s, {}), on.get(s, {})
        passed_off = {t for t, (st, _) in o.items() if st == "pass"}
        passed_on = {t for t, (st, _) in n.items() if st == "pass"}
        lost = sorted(passed_off - passed_on)
        rows.append((s.rsplit(".", 1)[-1], len(o), len(passed_off), len(n), len(passed_on), len(lost)))
        for t in lost:
            st, msg = n.get(t, ("missing", "did not run with the extension on (suite aborted?)"))
            if (s, t) in known:
                known_seen.append((s, t, known[(s, t)]))
            else:
                regressions.append((s, t, st, msg))

    def seconds(d):
        try:
            return open(os.path.join(d, "seconds")).read().strip() + " s"
        except OSError:
            return "?"

    def stats(d):
        """Per suite, the library's counters of that suite's JVM that say what the sort did."""
        lines = []
        for path in sorted(glob.glob(os.path.join(d, "native-stats", "*"))):
            counters = open(path).read().strip().splitlines()
            shown = [c for c in counters if c == "not loaded" or c.startswith(("plansCreated", "plansSpilled", "spillFiles", "bytesSpilled", "limitFailures", "filesystemErrors", "livePlans"))]
            lines.append(f"{os.path.basename(path).rsplit('.', 1)[-1]}: {', '.join(shown) or 'no counters'}")
        return lines or ["no record"]

    out = ["# Spark's own suites, Spillway's extension off and on", "",
           f"Run off: {seconds(off_dir)}; run on: {seconds(on_dir)}.", "",
           "| suite | tests off | passed off | tests on | passed on | passed off, not on |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %d | %d | %d | %d | %d |" % r)
    tot = [sum(r[i] for r in rows) for i in range(1, 6)]
    out.append("| **all** | %d | %d | %d | %d | %d |" % tuple(tot))
    out += ["", "Native library, run off:", "", *("- " + l for l in stats(off_dir)),
            "", "Native library, run on:", "", *("- " + l for l in stats(on_dir)), ""]
    if known_seen:
        out += ["## Known differences (passed off, failed on, with the reason)", ""]
        out += [f"- `{s}`: {t}: {r}" for s, t, r in known_seen] + [""]
    if regressions:
        out += ["## Passed off, failed on", ""]
        for s, t, st, msg in regressions:
            out += [f"- `{s}`: {t} ({st})", "", "  ```", *("  " + l for l in first_lines(msg).splitlines()), "  ```", ""]
    else:
        out += ["Every test that passed off passed on" + (", but the known differences above." if known_seen else "."), ""]
    text = "\n".join(out)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(off_dir)), "report.md"), "w") as f:
        f.write(text + "\n")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
