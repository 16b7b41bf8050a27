#!/usr/bin/env bash
# Builds promtool (github.com/prometheus/prometheus/cmd/promtool) from its Go module through the
# Go module proxy and caches it by version. No prebuilt binary is downloaded. The monitoring test
# (test/e2e/monitoring.test.ts) runs `promtool check rules` and `promtool test rules` with it.
#
#   scripts/build-promtool.sh                            # build if missing, print the folder
#   PROMETHEUS_VERSION=v0.315.1 scripts/build-promtool.sh
#
# Prometheus 3.x is published to the module proxy as v0.3xx.y (v0.316.0 is Prometheus 3.16.0).
# The folder printed on the last line holds `promtool`. Cache:
# ${RELSYNC_PROMTOOL_CACHE:-~/.cache/relsync/promtool}/<version>/.
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE_ROOT="${RELSYNC_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/relsync/promtool}"
OUT="$CACHE_ROOT/$PROMETHEUS_VERSION"

if [[ -x "$OUT/promtool" ]]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "build-promtool: the 'go' command is required to build promtool" >&2; exit 1; }
mkdir -p "$OUT.tmp"
GOBIN="$OUT.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
