#!/usr/bin/env python3
"""make bench-charts: the benchmark pages' charts, drawn from the pages' own result tables.

A benchmark prints its result table, which goes onto its page under docs/benchmarks/ as it is; a
re-run replaces the table, and this script draws the PNGs the page shows (docs/benchmarks/img/)
from that table again, so a chart never disagrees with the figures beside it. Needs matplotlib
(make bench-charts installs it into a venv under build/).
"""
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "benchmarks"
IMG = PAGES / "img"
COLOURS = {"Spark": "#7f7f7f", "Spillway": "#1f77b4", "Comet": "#ff7f0e", "eager": "#d62728", "lazy": "#1f77b4"}


def tables(page):
    """Every Markdown table of page, as a list of rows (lists of cells), header first."""
    out, rows = [], []
    for line in (PAGES / page).read_text().splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            out.append(rows)
            rows = []
    if rows:
        out.append(rows)
    return out


def table_with(page, heading):
    """The table of page whose header row holds heading."""
    for t in tables(page):
        if heading in t[0]:
            return t
    sys.exit(f"bench-charts: {page} has no table with a column {heading!r}")


def number(cell):
    """The first number of a cell ('2.81 (2.44–2.86)' is 2.81, '**2.09×**' 2.09), or None."""
    m = re.search(r"[0-9]+(?:\.[0-9]+)?", cell.replace(",", ""))
    return float(m.group()) if m else None


def duration_ns(cell):
    """A JMH time ('485 ns ± 67.3 ns', '1.65 ms ± 442 µs') in ns, or None."""
    m = re.match(r"([0-9.]+)\s*(ns|µs|us|ms|s)\b", cell)
    if not m:
        return None
    return float(m.group(1)) * {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]


def engine(way):
    return next((e for e in ("Spillway", "Comet", "Spark") if way.startswith(e)), None)


def sql_sort():
    """Per shape and engine: the sorting stage's wall, and the bytes it spilled."""
    t = table_with("sql-sort.md", "stage wall (s)")
    head = t[0]
    wall, disk = head.index("stage wall (s)"), head.index("on disk (MB)")
    data, shape = {}, None
    for row in t[1:]:
        if row[0]:
            shape = row[0].split(" (")[0]
        e = engine(row[1])
        if e is None:
            continue  # the floor
        if e == "Comet" and not row[1].startswith("Comet 1"):
            data.setdefault(shape, {})[e] = "left to Spark"
        elif row[wall].startswith("failed"):
            data.setdefault(shape, {})[e] = "failed"
        else:
            data.setdefault(shape, {})[e] = (number(row[wall]), number(row[disk]))
    shapes = list(data)
    for what, index, label, name in (
        ("sorting stage, wall", 0, "seconds (lower is better)", "sql-sort-stage.png"),
        ("bytes spilled by the stage", 1, "MB on disk (lower is better)", "sql-sort-spilled.png"),
    ):
        fig, ax = plt.subplots(figsize=(8, 3.6), dpi=110)
        width = 0.27
        for k, e in enumerate(("Spark", "Spillway", "Comet")):
            xs = [i + (k - 1) * width for i in range(len(shapes))]
            ys = [data[s].get(e) for s in shapes]
            ax.bar([x for x, y in zip(xs, ys) if isinstance(y, tuple)], [y[index] for y in ys if isinstance(y, tuple)],
                   width, label=e if e != "Comet" else "Comet 1.2.0", color=COLOURS[e])
            for x, y in zip(xs, ys):
                if isinstance(y, str):  # no figure: say why where the bar would be
                    ax.text(x, 0, " " + y, rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(shapes)), shapes)
        ax.set_ylabel(label)
        ax.set_title(f"The SQL sort: {what}, per row shape")
        ax.legend(frameon=False)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        fig.savefig(IMG / name)
        plt.close(fig)
        print(f"bench-charts: wrote docs/benchmarks/img/{name}")


def plan_lifecycle():
    """A plan that never spills, per number of local dirs: lazy (Spillway) against eager dirs."""
    t = table_with("plan-lifecycle.md", "eager ÷ lazy")
    head = t[0]
    threads, dirs = head.index("threads"), head.index("local dirs")
    lazy, eager = head.index("lazy, same String[]"), head.index("eager")
    rows = [r for r in t[1:] if r[threads] == "1"]
    xs = [r[dirs] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.4), dpi=110)
    width = 0.38
    for k, (name, col) in enumerate((("Spillway (lazy)", lazy), ("eager dirs, as DataFusion's Directories", eager))):
        ys = [duration_ns(r[col]) / 1e3 for r in rows]
        ax.bar([i + (k - 0.5) * width for i in range(len(xs))], ys, width, label=name,
               color=COLOURS["lazy" if k == 0 else "eager"])
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.1)
    ax.set_xticks(range(len(xs)), [f"{x} local dir{'s' if x != '1' else ''}" for x in xs])
    ax.set_ylabel("µs per plan, log scale")
    ax.set_title("A plan that never spills: create + release, one thread")
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(IMG / "plan-lifecycle.png")
    plt.close(fig)
    print("bench-charts: wrote docs/benchmarks/img/plan-lifecycle.png")


if __name__ == "__main__":
    IMG.mkdir(parents=True, exist_ok=True)
    sql_sort()
    plan_lifecycle()
