#!/usr/bin/env bash
# scripts/helm.sh — make sure a helm binary is at hand for the chart checks
# (test/deploy/helm.integration.spec.ts) and print its path on standard output.
#
#   scripts/helm.sh                  install if missing, print the path
#   HELM="$(scripts/helm.sh)"        what .ci/run does before the tests
#
# helm is built from source with Go from the Go module proxy (`go install`), so nothing but Go
# and the module proxy is needed: no release tarball download. The first build takes a few
# minutes on 2 cores; after that the script only checks the binary and returns at once.
#
#   NEATROOTS_HELM_VERSION   default v3.22.0
#   NEATROOTS_TOOLS_DIR      default ~/.cache/neatroots-tools (the binary goes to bin/ in it)
set -euo pipefail

VERSION="${NEATROOTS_HELM_VERSION:-v3.22.0}"
TOOLS_DIR="${NEATROOTS_TOOLS_DIR:-$HOME/.cache/neatroots-tools}"
BIN_DIR="$TOOLS_DIR/bin"
HELM="$BIN_DIR/helm"
STAMP="$BIN_DIR/helm.version" # the version that was built: helm's own `version` needs ldflags

say() { printf '[helm.sh] %s\n' "$*" >&2; }
die() { printf '[helm.sh] ERROR: %s\n' "$*" >&2; exit 1; }

installed() { [[ -x "$HELM" && -f "$STAMP" && "$(cat "$STAMP")" == "$VERSION" ]]; }

if installed; then
  printf '%s\n' "$HELM"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is needed to build helm $VERSION (apt-get install golang-go, or a newer Go); or put a helm binary at $HELM and '$VERSION' in $STAMP"

mkdir -p "$BIN_DIR"
cd "$TOOLS_DIR" # no go.mod or go.work of the caller may take part in the build
# Serialize parallel calls (two test runs, or CI and a developer) on one lock.
exec 9>"$TOOLS_DIR/.helm.lock"
flock 9
if installed; then # built by the call we waited for
  printf '%s\n' "$HELM"
  exit 0
fi

stage="$(mktemp -d "$TOOLS_DIR/.helm-build.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
log="$TOOLS_DIR/helm-build.log"
: >"$log"

# The link flags of helm's own Makefile. Without them `helm version` says "v3.22" and, worse,
# `helm template` and `helm lint` assume Kubernetes 1.20: charts that require a newer cluster
# fail to render and the deprecation lint checks against a five-year-old API. The Kubernetes
# version is the one helm's client-go module targets (client-go v0.X.Y is Kubernetes 1.X).
gomod="$(go mod download -json "helm.sh/helm/v3@$VERSION" 2>>"$log" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$gomod" && -f "$gomod" ]] || { tail -n 20 "$log" >&2; die "the Go module proxy did not serve helm.sh/helm/v3@$VERSION (log: $log)"; }
client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")"
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || die "cannot tell the Kubernetes version from $gomod (k8s.io/client-go ${client_go:-missing})"
k8s_minor="${BASH_REMATCH[1]}"
ldflags="-w -s -X helm.sh/helm/v3/internal/version.version=$VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

say "building helm $VERSION (Kubernetes 1.$k8s_minor) with $(go version | awk '{print $3}'): go install helm.sh/helm/v3/cmd/helm@$VERSION; takes a few minutes the first time; log: $log"
start=$SECONDS
if ! GOBIN="$stage" GOFLAGS=-mod=mod go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$VERSION" >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "go install of helm $VERSION failed (see above; log: $log)"
fi
built="$("$stage/helm" version --template '{{.Version}}' 2>>"$log")" || die "the helm that was built does not run (log: $log)"
[[ "$built" == "$VERSION" ]] || die "the helm that was built says it is ${built:-nothing}, not $VERSION (log: $log)"
mv -f "$stage/helm" "$HELM"
printf '%s\n' "$VERSION" >"$STAMP"
say "helm $VERSION built in $((SECONDS - start))s: $HELM"
printf '%s\n' "$HELM"
