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

HELM_VERSION="${HELM_VERSION:-v4.3.2}"
CACHE_ROOT="${RELSYNC_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/relsync/helm}"
OUT="$CACHE_ROOT/$HELM_VERSION"

if [[ -x "$OUT/helm" ]]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "build-helm: the 'go' command is required to build helm" >&2; exit 1; }
mkdir -p "$OUT.tmp"
GOBIN="$OUT.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
