#!/usr/bin/env bash
# scripts/chromium.sh — make sure a Chromium is at hand for the web app's browser tests
# (packages/web/src/*.integration.spec.ts) and print its path on standard output.
#
#   scripts/chromium.sh                     install if missing, print the path
#   CHROMIUM_PATH="$(scripts/chromium.sh)"  what .ci/run does before the tests
#
# The browser is Debian's `chromium` package, installed with apt-get (root, as on CI): no
# browser build is downloaded at `npm install`; playwright-core only drives it. Once it is
# there the script only prints the path.
#
#   CHROMIUM_PATH   a Chromium to use instead (checked, not installed)
set -euo pipefail

say() { printf '[chromium.sh] %s\n' "$*" >&2; }
die() { printf '[chromium.sh] ERROR: %s\n' "$*" >&2; exit 1; }

if [[ -n "${CHROMIUM_PATH:-}" ]]; then
  [[ -x "$CHROMIUM_PATH" ]] || die "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file"
  printf '%s\n' "$CHROMIUM_PATH"
  exit 0
fi

find_it() { command -v chromium || command -v chromium-browser || true; }

BIN="$(find_it)"
if [[ -z "$BIN" ]]; then
  command -v apt-get >/dev/null || die "no chromium and no apt-get: install Chromium and set CHROMIUM_PATH"
  SUDO=""
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null || die "installing chromium needs root (or set CHROMIUM_PATH)"
    SUDO="sudo"
  fi
  say "installing Debian's chromium package (once)"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >&2
  BIN="$(find_it)"
  [[ -n "$BIN" ]] || die "apt-get installed chromium but no chromium command is on PATH"
fi
"$BIN" --version >&2 || die "$BIN does not run"
printf '%s\n' "$BIN"
