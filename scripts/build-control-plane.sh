#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from the upstream Go modules through the Go
# module proxy and caches them by version. No prebuilt binary is downloaded.
#
#   scripts/build-control-plane.sh            # build if missing, print the folder
#   KUBE_VERSION=v1.36.3 scripts/build-control-plane.sh
#
# The folder printed on the last line holds `kube-apiserver`, `etcd` and
# `kubectl` (for `kubectl apply -k --dry-run=server` of deploy/); it is what
# test/harness uses (and what KUBEBUILDER_ASSETS may point at instead).
# Only missing binaries are built.
#
# Why a wrapper module: k8s.io/kubernetes requires its staging modules
# (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and replaces them with local
# paths, and a dependency's replace lines are ignored. The wrapper requires
# k8s.io/kubernetes and replaces each staging module with its published
# v0.<minor>.<patch> release. The staging list is read from that release's own
# go.mod, since it changes between releases.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
CACHE_ROOT="${RELSYNC_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/relsync/control-plane}"
OUT="$CACHE_ROOT/$KUBE_VERSION"

# RELSYNC_ONLY=kubectl builds just that one (when KUBEBUILDER_ASSETS has the others).
want=(${RELSYNC_ONLY:-kube-apiserver etcd kubectl})
missing_any=false
for b in "${want[@]}"; do [[ -x "$OUT/$b" ]] || missing_any=true; done
wanted() { [[ " ${want[*]} " == *" $1 "* && ! -x "$OUT/$1" ]]; }
if [[ $missing_any == false ]]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || { echo "build-control-plane: the 'go' command is required to build kube-apiserver and etcd" >&2; exit 1; }

minor_patch="${KUBE_VERSION#v1.}"          # 36.3
major=1
minor="${minor_patch%%.*}"                 # 36
staging_version="v0.${minor_patch}"        # v0.36.3

work="$CACHE_ROOT/.build-$KUBE_VERSION"
rm -rf "$work"
mkdir -p "$work" "$OUT"
cd "$work"

echo "build-control-plane: reading the staging modules of k8s.io/kubernetes@$KUBE_VERSION" >&2
gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
go_directive="$(go mod edit -json "$gomod" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Go"])')"
etcd_version="$(go mod edit -json "$gomod" | python3 -c '
import json,sys
for r in json.load(sys.stdin)["Require"]:
    if r["Path"] == "go.etcd.io/etcd/server/v3": print(r["Version"])')"
staging="$(go mod edit -json "$gomod" | python3 -c '
import json,sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"): print(r["Old"]["Path"])')"

{
  echo "module relsync.local/control-plane"
  echo
  echo "go $go_directive"
  echo
  echo "require ("
  echo "  k8s.io/kubernetes $KUBE_VERSION"
  echo "  go.etcd.io/etcd/server/v3 $etcd_version"
  echo ")"
  echo
  echo "replace ("
  for m in $staging; do echo "  $m => $m $staging_version"; done
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO

echo "build-control-plane: resolving modules (etcd $etcd_version)" >&2
go mod tidy -e >&2 || true
go mod download >&2

build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

start=$(date +%s)
if wanted etcd; then
  echo "build-control-plane: building etcd $etcd_version" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$OUT/etcd.tmp" "$OUT/etcd"
  echo "$etcd_version" > "$OUT/etcd.version"
fi
if wanted kube-apiserver; then
  echo "build-control-plane: building kube-apiserver $KUBE_VERSION (this takes many minutes on 2 cores)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
fi
if wanted kubectl; then
  echo "build-control-plane: building kubectl $KUBE_VERSION" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$OUT/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl
  mv "$OUT/kubectl.tmp" "$OUT/kubectl"
fi
echo "build-control-plane: built in $(( $(date +%s) - start ))s" >&2
rm -rf "$work"
echo "$OUT"
