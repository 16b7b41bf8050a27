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
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-cache.sh"

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
tool_cache promtool "$PROMETHEUS_VERSION" "${RELSYNC_PROMTOOL_CACHE:-}" promtool
need go "to build promtool"
go_install "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
echo "$OUT"
