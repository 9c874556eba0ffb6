#!/usr/bin/env bash
# scripts/gen-go.sh — generate the Go client's protobuf and gRPC code from proto/
# (neatroots.v1 spans and Ingest) into clients/go/gen/, with buf (node_modules/@bufbuild/buf)
# running protoc-gen-go and protoc-gen-go-grpc. The plugins are built once with `go install`
# from the Go module proxy into the tools folder (cached). The output is committed so
# `go get` needs no toolchain; never edit it by hand: change proto/ and run this script
# (a test checks the two are in step).
#
#   scripts/gen-go.sh [OUT_DIR]   default clients/go/gen
#   NEATROOTS_TOOLS_DIR           default ~/.cache/neatroots-tools (the plugins go to bin/ in it)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/clients/go/gen}"
BIN="${NEATROOTS_TOOLS_DIR:-$HOME/.cache/neatroots-tools}/bin"
PROTOC_GEN_GO=v1.36.10
PROTOC_GEN_GO_GRPC=v1.5.1

say() { printf '[gen-go.sh] %s\n' "$*" >&2; }
command -v go >/dev/null || { say "ERROR: Go is needed (apt-get install golang-go, or a newer Go)"; exit 1; }
mkdir -p "$BIN"
install() { # name module version
  if [[ ! -x "$BIN/$1" || "$(cat "$BIN/$1.version" 2>/dev/null)" != "$3" ]]; then
    say "building $1 $3 (once)"
    (cd "$BIN" && GOBIN="$BIN" GOFLAGS=-mod=mod go install "$2@$3" >&2)
    printf '%s\n' "$3" >"$BIN/$1.version"
  fi
}
install protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO"
install protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC"

BUF="$ROOT/node_modules/@bufbuild/buf/bin/buf"
[[ -x "$BUF" ]] || { say "ERROR: $BUF is missing: run npm install first"; exit 1; }
TEMPLATE="$(mktemp --suffix .buf.gen.yaml)"
trap 'rm -f "$TEMPLATE"' EXIT
sed "s#out: clients/go/gen#out: $OUT#" "$ROOT/clients/go/buf.gen.yaml" >"$TEMPLATE"
cd "$ROOT"
PATH="$BIN:$PATH" "$BUF" generate --template "$TEMPLATE" --path proto/neatroots/v1/spans.proto --path proto/neatroots/v1/ingest.proto
