#!/usr/bin/env bash
# Builds the helm binary (helm.sh/helm/v4/cmd/helm) from its Go module through the Go
# module proxy and caches it by version. No prebuilt binary is downloaded.
#
#   scripts/build-helm.sh                       # build if missing, print the folder
#   HELM_VERSION=v4.3.1 scripts/build-helm.sh
#
# The folder printed on the last line holds `helm`. Cache:
# ${RELSYNC_HELM_CACHE:-~/.cache/relsync/helm}/<version>/. helm's module has no replace
# directives, so `go install` of the module at a version builds it as released.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-cache.sh"

HELM_VERSION="${HELM_VERSION:-v4.3.2}"
tool_cache helm "$HELM_VERSION" "${RELSYNC_HELM_CACHE:-}" helm
need go "to build helm"
go_install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
echo "$OUT"
