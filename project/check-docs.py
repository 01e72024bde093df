#!/usr/bin/env python3
"""Checks that the docs cannot drift from the code (make docs-check; part of make test).

For every Markdown file git tracks, it fails (file:line: what is wrong) when:
  - a relative link does not resolve: the file or directory, and the #anchor of a heading in a .md file;
  - a `make <target>` in code names no target of the Makefile;
  - a spark.spillway.* key is not declared in scala-shim/src/main/scala/spillway/SpillwayConf.scala;
when a figure in README.md (a ratio such as 2.09x, or a duration such as 0.40 s) appears on
no page of docs/benchmarks/; and when a source file (Go, Scala, Java, Rust, C, scripts, the
Makefile) names a page under docs/ or a top-level page that does not exist. Python 3 standard library only.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONF = "scala-shim/src/main/scala/spillway/SpillwayConf.scala"

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
MAKE = re.compile(r"(?:^|[\s;(&|])make\s+([^#;&|)`]*)")
TARGET_WORD = re.compile(r"^[A-Za-z][\w.-]*$")
# The project's pages as code names them: under docs/, or a top-level page (README.md, CHANGELOG.md).
MD_PATH = re.compile(r"(?<![\w/.-])(docs/(?:[\w.-]+/)*[\w-]+\.md|[A-Z][A-Z_-]*\.md)(?![\w/])")
SOURCES = ["*.go", "*.scala", "*.java", "*.rs", "*.c", "*.h", "*.sh", "*.py", "*.sbt", "*.toml", "Makefile"]
KEY = re.compile(r"(?<![\w.])spark\.spillway\.[A-Za-z0-9_.]*[A-Za-z0-9_]")
FIGURE = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)\s?(×|x(?![\w])|ns\b|µs\b|us\b|ms\b|s\b|min\b|minutes?\b|seconds?\b|h\b|hours?\b)")
UNITS = {"×": "x", "x": "x", "us": "µs", "second": "s", "seconds": "s", "minute": "min", "minutes": "min",
         "hour": "h", "hours": "h"}


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read().splitlines()


def split_code(lines):
    """Yields (line number, prose, [code]) per line: prose has code spans and fenced blocks removed."""
    fenced = False
    for n, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            yield n, "", []
        elif fenced:
            yield n, "", [line.split(" #")[0]]
        else:
            yield n, CODE_SPAN.sub(" ", line), [m.group(2) for m in CODE_SPAN.finditer(line)]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*\*|\*|_(?=\W)|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found, fenced = {}, set(), False
        for line in read(path):
            if FENCE.match(line):
                fenced = not fenced
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                found.add(s if k == 0 else "%s-%d" % (s, k))
        cache[path] = found
    return cache[path]


def make_targets():
    targets = set()
    for line in read("Makefile"):
        m = re.match(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?)\s*::?(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    return targets


def figures(text):
    return {(m.group(1).replace(",", ""), UNITS.get(m.group(2), m.group(2))) for m in FIGURE.finditer(text)}


def main():
    os.chdir(ROOT)
    docs = sorted(subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True,
                                 check=True).stdout.split())
    docs = [d for d in docs if os.path.isfile(d)]
    targets = make_targets()
    keys = set(re.findall(r"\"(spark\.spillway\.[^\"]+)\"", open(CONF, encoding="utf-8").read()))
    bench = set()
    for d in docs:
        if d.startswith("docs/benchmarks/"):
            bench |= figures("\n".join(p for _, p, c in split_code(read(d)) for p in [p] + c))
    errors = []
    for doc in docs:
        for n, prose, code in split_code(read(doc)):
            where = "%s:%d" % (doc, n)
            for target in LINK.findall(prose):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                if not os.path.exists(dest):
                    errors.append("%s: link %s: no file %s" % (where, target, dest))
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    errors.append("%s: link %s: no heading #%s in %s" % (where, target, anchor, dest))
            for snippet in code:
                for m in MAKE.finditer(snippet):
                    for word in m.group(1).split():
                        if "=" in word or word.startswith("-"):
                            continue
                        if not TARGET_WORD.match(word):
                            break
                        if word not in targets:
                            errors.append("%s: make %s: no such target in the Makefile" % (where, word))
            for key in KEY.findall(" ".join([prose] + code)):
                if key not in keys:
                    errors.append("%s: %s is not a key declared in %s" % (where, key, CONF))
            if doc == "README.md":
                for number, unit in sorted(figures(prose)):
                    if (number, unit) not in bench:
                        errors.append("%s: figure %s%s appears on no page of docs/benchmarks/"
                                      % (where, number, "×" if unit == "x" else " " + unit))
    sources = subprocess.run(["git", "ls-files", "--"] + SOURCES, capture_output=True, text=True,
                             check=True).stdout.split()
    for src in sources:
        if not os.path.isfile(src):
            continue
        for n, line in enumerate(read(src), 1):
            for path in MD_PATH.findall(line):
                if not os.path.exists(path):
                    errors.append("%s:%d: names %s, which does not exist" % (src, n, path))
    for e in errors:
        print(e)
    print("check-docs: %d Markdown files, %d source files, %d problem(s)" % (len(docs), len(sources), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
