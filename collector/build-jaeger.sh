#!/usr/bin/env bash
# Build Jaeger v2 (module github.com/jaegertracing/jaeger v1.75.0 = Jaeger v2.12.0, on collector
# v0.139) as the local/test tracing backend: collector/jaeger/bin/jaeger.
#
# Built in its own Go module (collector/jaeger/go.mod, which pins it as a `tool`): sharing a
# go.mod with the v0.165 collector lifts its collector modules and it fails at start.
# Reproducible: pinned module, go.sum, -trimpath, no VCS stamping; the normal Go module and build
# caches make a rebuild fast. Skips work when the binary is newer than go.mod/go.sum and this
# script (YETO_JAEGER_FORCE_BUILD=1 rebuilds). Prints the binary path on stdout (last line).
# A module build serves only a placeholder UI; the query APIs work.
set -euo pipefail

JAEGER_VERSION=v1.75.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/jaeger"
bin="$mod/bin/jaeger"

if [[ "${YETO_JAEGER_FORCE_BUILD:-0}" != 1 && -x "$bin" && "$bin" -nt "$mod/go.mod" \
      && "$bin" -nt "$mod/go.sum" && "$bin" -nt "$here/build-jaeger.sh" ]]; then
  echo "jaeger is up to date" >&2
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build-jaeger.sh: 'go' not found on PATH" >&2; exit 1; }

export GOWORK=off
export CGO_ENABLED="${CGO_ENABLED:-0}"
export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"

cd "$mod"
if ! grep -q "github.com/jaegertracing/jaeger $JAEGER_VERSION" go.mod; then
  go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION"
fi
mkdir -p bin
echo "building jaeger $JAEGER_VERSION" >&2
go build -trimpath -ldflags='-s -w' -o "$bin" github.com/jaegertracing/jaeger/cmd/jaeger
echo "$bin"
