#!/usr/bin/env bash
# scripts/compose.sh — make sure a docker compose CLI is at hand for `docker compose config`
# (test/deploy/compose.integration.spec.ts) and print how to call it on standard output.
#
#   scripts/compose.sh               install if missing, print the command
#
# `docker compose config` validates docker-compose.yml against the Compose specification and
# needs no Docker engine. The docker CLI plugin is used when it is installed; otherwise Compose
# is built from source with Go: the module comes from the Go module proxy (`go mod download`)
# and is built as its own main module, since its go.mod has exclude directives that
# `go install module@version` refuses. The first build takes a few minutes on 2 cores; after that
# the script only checks the binary and returns at once.
#
#   NEATROOTS_COMPOSE_VERSION   default v5.6.0 (needs Go 1.26.8 or newer)
#   NEATROOTS_TOOLS_DIR         default ~/.cache/neatroots-tools (the binary goes to bin/ in it)
set -euo pipefail

VERSION="${NEATROOTS_COMPOSE_VERSION:-v5.6.0}"
MODULE="github.com/docker/compose/v5"
TOOLS_DIR="${NEATROOTS_TOOLS_DIR:-$HOME/.cache/neatroots-tools}"
BIN_DIR="$TOOLS_DIR/bin"
COMPOSE="$BIN_DIR/docker-compose"
STAMP="$BIN_DIR/docker-compose.version"

say() { printf '[compose.sh] %s\n' "$*" >&2; }
die() { printf '[compose.sh] ERROR: %s\n' "$*" >&2; exit 1; }

if docker compose version >/dev/null 2>&1; then
  printf '%s\n' "docker compose"
  exit 0
fi

installed() { [[ -x "$COMPOSE" && -f "$STAMP" && "$(cat "$STAMP")" == "$VERSION" ]]; }

if installed; then
  printf '%s\n' "$COMPOSE"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is needed to build docker compose $VERSION; or install the docker compose plugin"

mkdir -p "$BIN_DIR"
cd "$TOOLS_DIR" # no go.mod or go.work of the caller may take part in the build
exec 9>"$TOOLS_DIR/.compose.lock"
flock 9
if installed; then
  printf '%s\n' "$COMPOSE"
  exit 0
fi

stage="$(mktemp -d "$TOOLS_DIR/.compose-build.XXXXXX")"
trap 'chmod -R u+w "$stage" 2>/dev/null; rm -rf "$stage"' EXIT
log="$TOOLS_DIR/compose-build.log"
: >"$log"
say "building docker compose $VERSION with $(go version | awk '{print $3}') from $MODULE@$VERSION; takes a few minutes the first time; log: $log"
start=$SECONDS
src="$(go mod download -json "$MODULE@$VERSION" 2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$src" && -f "$src/go.mod" ]] || { tail -n 20 "$log" >&2; die "the Go module proxy did not serve $MODULE@$VERSION (log: $log)"; }
cp -R "$src" "$stage/src"
chmod -R u+w "$stage/src"
if ! (cd "$stage/src" && GOFLAGS=-mod=mod go build -ldflags "-w -s -X $MODULE/internal.Version=$VERSION" -o "$stage/docker-compose" ./cmd) >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "building docker compose $VERSION failed (see above; log: $log)"
fi
"$stage/docker-compose" version >>"$log" 2>&1 || die "the docker compose that was built does not run (log: $log)"
mv -f "$stage/docker-compose" "$COMPOSE"
printf '%s\n' "$VERSION" >"$STAMP"
say "docker compose $VERSION built in $((SECONDS - start))s: $COMPOSE"
printf '%s\n' "$COMPOSE"
