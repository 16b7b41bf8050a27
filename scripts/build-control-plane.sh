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
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-cache.sh"

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
# RELSYNC_ONLY=kubectl builds just that one (when KUBEBUILDER_ASSETS has the others).
tool_cache control-plane "$KUBE_VERSION" "${RELSYNC_CONTROL_PLANE_CACHE:-}" ${RELSYNC_ONLY:-kube-apiserver etcd kubectl}
wanted() { [[ " ${MISSING[*]} " == *" $1 "* ]]; }
need go "to build kube-apiserver and etcd"

minor_patch="${KUBE_VERSION#v1.}"          # 36.3
major=1
minor="${minor_patch%%.*}"                 # 36
staging_version="v0.${minor_patch}"        # v0.36.3

work_dir "$KUBE_VERSION"

say "reading the staging modules of k8s.io/kubernetes@$KUBE_VERSION"
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
tools_go go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl

say "resolving modules (etcd $etcd_version)"
go mod tidy -e >&2 || true
go mod download >&2

ldflags="$(kube_ldflags "$KUBE_VERSION" "$major" "$minor")"

start=$(date +%s)
if wanted etcd; then
  say "building etcd $etcd_version"
  go_build etcd go.etcd.io/etcd/server/v3 "-s -w"
  echo "$etcd_version" > "$OUT/etcd.version"
fi
if wanted kube-apiserver; then
  say "building kube-apiserver $KUBE_VERSION (this takes many minutes on 2 cores)"
  go_build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
fi
if wanted kubectl; then
  say "building kubectl $KUBE_VERSION"
  go_build kubectl k8s.io/kubernetes/cmd/kubectl "$ldflags"
fi
built "$start"
