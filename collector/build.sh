#!/usr/bin/env bash
# Build the yeto-otel collector distribution (collector/build/yeto-otelcol) from
# collector/builder-config.yaml with the OpenTelemetry Collector Builder (ocb).
#
# Reproducible: the builder is pinned at the core release the manifest uses, every
# component version is pinned in the manifest, the builder compiles with -trimpath and
# -ldflags='-s -w', and VCS stamping is off. The normal Go module cache (go env GOMODCACHE)
# and build cache (go env GOCACHE) are used, so a rebuild after a manifest change is fast.
#
# Skips all work when the binary is newer than the manifest (and this script); set
# YETO_COLLECTOR_FORCE_BUILD=1 to rebuild anyway. Prints the binary path on stdout (last line).
set -euo pipefail

BUILDER_VERSION=v0.165.0   # = collector core version in builder-config.yaml

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
manifest="$here/builder-config.yaml"
bin="$here/build/yeto-otelcol"

if [[ "${YETO_COLLECTOR_FORCE_BUILD:-0}" != 1 && -x "$bin" && "$bin" -nt "$manifest" && "$bin" -nt "$here/build.sh" ]]; then
  echo "yeto-otelcol is up to date" >&2
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: 'go' not found on PATH (Go >= 1.25 needed)" >&2; exit 1; }

export GOWORK=off
export CGO_ENABLED="${CGO_ENABLED:-0}"
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"

tools="$here/build/tools"
builder="$tools/builder"
if [[ ! -x "$builder" ]] || ! "$builder" version 2>/dev/null | grep -q "${BUILDER_VERSION#v}"; then
  echo "installing go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION" >&2
  mkdir -p "$tools"
  GOBIN="$tools" go install -trimpath "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION"
fi

echo "building yeto-otelcol from $manifest" >&2
"$builder" --config "$manifest" >&2
# The builder writes a fresh binary; make its mtime reflect this build for the up-to-date check.
touch "$bin"
echo "$bin"
