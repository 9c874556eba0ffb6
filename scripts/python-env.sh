#!/usr/bin/env bash
# scripts/python-env.sh — make sure the Python environment of the Python tests is there and
# print its interpreter's path on standard output.
#
#   scripts/python-env.sh                         create or update the venv, print its python
#   NEATROOTS_PYTHON="$(scripts/python-env.sh)"   what .ci/run does before the tests
#
# A venv outside the work tree (cached between runs on one machine), with
# scripts/python-requirements.txt installed by pip; it is reinstalled only when that file
# changes (its hash is kept in the venv). The tests that need Python (OTel Python SDK over
# OTLP/HTTP, the Python client) find it through NEATROOTS_PYTHON, or at the default place.
#
#   NEATROOTS_PYTHON_ENV   where the venv lives (default ~/.cache/neatroots/python-env)
set -euo pipefail

say() { printf '[python-env.sh] %s\n' "$*" >&2; }
die() { printf '[python-env.sh] ERROR: %s\n' "$*" >&2; exit 1; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REQ="$ROOT/scripts/python-requirements.txt"
ENV_DIR="${NEATROOTS_PYTHON_ENV:-$HOME/.cache/neatroots/python-env}"
PY="$ENV_DIR/bin/python"

command -v python3 >/dev/null || die "python3 is not installed (3.9 or later is needed)"
if [[ ! -x "$PY" ]]; then
  say "creating the venv in $ENV_DIR (once)"
  python3 -m venv "$ENV_DIR" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
fi
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
have="$(cat "$ENV_DIR/.requirements.sha256" 2>/dev/null || true)"
if [[ "$want" != "$have" ]]; then
  say "installing scripts/python-requirements.txt"
  "$PY" -m pip install -q --disable-pip-version-check -r "$REQ" >&2
  printf '%s\n' "$want" >"$ENV_DIR/.requirements.sha256"
fi
printf '%s\n' "$PY"
