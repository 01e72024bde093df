#!/usr/bin/env bash
# Selenium for the UI test (test/ui/run.sh, `make test-ui`), installed with pip into
# build/ui-test-venv unless it is there already; prints the venv's path. .ci/run calls it on a
# fresh machine before `make test`, so a missing package index fails there, with this message.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$repo_root/build/ui-test-venv"
if ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
  echo "ui-test: installing selenium into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install --no-input --disable-pip-version-check -q selenium >&2 ||
    { echo "ui-test: could not install selenium with pip into $venv" >&2; exit 1; }
fi
echo "$venv"
