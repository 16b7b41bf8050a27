#!/usr/bin/env bash
# Builds the kcp server binary (github.com/kcp-dev/kcp/cmd/kcp), and for kcp with
# several shards its cache server and front-proxy (cmd/cache-server,
# cmd/kcp-front-proxy), from its Go module through the Go module proxy and caches
# them by version. No prebuilt binary is downloaded.
#
#   scripts/build-kcp.sh                      # build if missing, print the folder
#   KCP_VERSION=v0.32.3 scripts/build-kcp.sh
#
# The folder printed on the last line holds `kcp`, `cache-server` and
# `kcp-front-proxy` (and `kcp.version`, the module versions they were built from). Cache: ${RELSYNC_KCP_CACHE:-~/.cache/relsync/kcp}/<version>/.
#
# Why a wrapper module (same reason as build-control-plane.sh): github.com/kcp-dev/kcp
# requires its in-repo staging modules (github.com/kcp-dev/sdk, client-go,
# apimachinery/v2, virtual-workspace-framework, code-generator/v3) at v0.0.0 and
# replaces them with ./staging/... paths, and k8s.io/* with its Kubernetes fork
# (github.com/kcp-dev/kubernetes/staging/src/...). A dependency's replace lines are
# ignored, so the wrapper copies the fork replaces verbatim and points each staging
# module at the release the kcp publishing bot tagged for this kcp version:
# v0.<minor>.<patch> (…/v2 and …/v3 modules: v2./v3.<minor>.<patch>).
# Both lists are read from that release's own go.mod.
#
# A staging module whose tag the proxy does not serve is replaced by an empty local
# stub: that is harmless when kcp does not compile it (code-generator is a
# build-time tool), and otherwise the build stops with "no required module provides
# package". KCP_STAGING_VERSIONS="module@version ..." pins staging modules explicitly.
# (v0.28.x has a single staging module, github.com/kcp-dev/kcp/sdk, tagged sdk/v0.28.x.)
#
# Default version: v0.28.1 is the newest kcp release whose whole dependency set the
# module proxy available to us serves. v0.32.3 resolves except
# github.com/kcp-dev/virtual-workspace-framework@v0.32.3 (proxy: 403 "This module
# version is not available"); with v0.31.2 of it instead, kcp fails to compile
# ("undefined: registry.ValidatePathSegmentName"). v0.31.2 lacks fork staging modules
# (k8s.io/controller-manager, endpointslice, ...) and v0.30.0 lacks
# github.com/kcp-dev/client-go@v0.30.0's zip. Where the proxy serves them, newer
# versions build the same way: KCP_VERSION=v0.32.3 scripts/build-kcp.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-tool-cache.sh"

KCP_VERSION="${KCP_VERSION:-v0.28.1}"
tool_cache kcp "$KCP_VERSION" "${RELSYNC_KCP_CACHE:-}" kcp cache-server kcp-front-proxy
need go "to build kcp"
need python3 "(to read go.mod JSON)"
[[ "$KCP_VERSION" =~ ^v0\.([0-9]+)\.([0-9]+)$ ]] || die "KCP_VERSION must look like v0.<minor>.<patch>, got '$KCP_VERSION'"
minor_patch="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"   # 31.2

work_dir "$KCP_VERSION"

# go.sum lines for modules that sum.golang.org (as reached through the proxy) does not
# answer for (lookup 404). Checked by hand: the proxy's zip is byte-identical to the
# git tag (github.com/kcp-dev/kcp v0.28.1 = commit 78b219f5f087, sdk = its sdk/ dir).
declare -A pinned_sums=(
  ["github.com/kcp-dev/kcp v0.28.1"]="h1:T7Ky7u9hvprkGrBnKuw0QZoP8O6TCbXqJz2Kwt6Tx+o= h1:q28Fx8sU/KA8kz8HGwtaqA7Iom8oR90ydoPK39jMaxo="
  ["github.com/kcp-dev/kcp/sdk v0.28.1"]="h1:bTtuHVjFRjbwFEqXTPxc1J1JP2Hc3mTYqQ2xfJsi16M= h1:8oZpWxkoMu2TDpx5DgdIGDigByKHKkeqVMA4GiWneoI="
)
pinned_sum_lines() {
  local k
  for k in "${!pinned_sums[@]}"; do
    set -- ${pinned_sums[$k]}
    echo "$k $1"
    echo "$k/go.mod $2"
  done
}

# Lookups that may skip the checksum database for the pinned modules: the kcp download
# below (its sums are compared right after) and the availability checks of the staging
# modules (the build itself verifies them against the pinned go.sum lines).
nosumdb="$(go env GONOSUMDB)"
for k in "${!pinned_sums[@]}"; do nosumdb="${nosumdb:+$nosumdb,}${k% *}"; done

say "reading go.mod of github.com/kcp-dev/kcp@$KCP_VERSION"
if ! info="$(GONOSUMDB="$nosumdb" go mod download -json "github.com/kcp-dev/kcp@$KCP_VERSION" 2>"$WORK/download.err")"; then
  # -json reports the failure in its "Error" field on stdout.
  python3 -c 'import json,sys; print(json.load(sys.stdin).get("Error",""))' <<<"$info" >&2 || true
  cat "$WORK/download.err" >&2
  say "(\"verifying ... sum.golang.org/lookup ...: 404\" means the checksum database does not know"
  say " this version; check the module against its git tag and add its go.sum lines to pinned_sums)"
  die "cannot download github.com/kcp-dev/kcp@$KCP_VERSION through GOPROXY=$(go env GOPROXY)"
fi
if [[ -n "${pinned_sums["github.com/kcp-dev/kcp $KCP_VERSION"]:-}" ]]; then
  got="$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["Sum"], d["GoModSum"])' <<<"$info")"
  [[ "$got" == "${pinned_sums["github.com/kcp-dev/kcp $KCP_VERSION"]}" ]] ||
    die "checksum mismatch for github.com/kcp-dev/kcp@$KCP_VERSION: got '$got', want '${pinned_sums["github.com/kcp-dev/kcp $KCP_VERSION"]}'"
fi
gomod="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' <<<"$info")"
srcdir="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$info")"
commit="$(python3 -c 'import json,sys; print(((json.load(sys.stdin).get("Origin") or {}).get("Hash") or "")[:10])' <<<"$info")"
modjson="$(go mod edit -json "$gomod")"
go_directive="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Go"])' <<<"$modjson")"
kube_version="$(python3 -c '
import json,sys
for r in json.load(sys.stdin)["Require"]:
    if r["Path"] == "k8s.io/kubernetes": print(r["Version"])' <<<"$modjson")"
# Non-local replaces (the Kubernetes fork), copied as they are.
fork_replaces="$(python3 -c '
import json,sys
for r in json.load(sys.stdin).get("Replace") or []:
    old, new = r["Old"], r["New"]
    if new.get("Version"):
        print("%s%s => %s %s" % (old["Path"], " " + old["Version"] if old.get("Version") else "", new["Path"], new["Version"]))' <<<"$modjson")"
staging="$(python3 -c '
import json,sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./"): print(r["Old"]["Path"])' <<<"$modjson")"

declare -A pinned=()
for mv in ${KCP_STAGING_VERSIONS:-}; do
  [[ "$mv" == *@* ]] || die "KCP_STAGING_VERSIONS entries must be module@version, got '$mv'"
  pinned["${mv%@*}"]="${mv#*@}"
done

staging_replaces=""
stubbed=""
for m in $staging; do
  if [[ -n "${pinned[$m]:-}" ]]; then
    v="${pinned[$m]}"
  elif [[ "$m" =~ /v([0-9]+)$ ]]; then
    v="v${BASH_REMATCH[1]}.$minor_patch"
  else
    v="v0.$minor_patch"
  fi
  if GONOSUMDB="$nosumdb" go list -m -f '{{.Version}}' "$m@$v" >/dev/null 2>"$WORK/list.err"; then
    staging_replaces+="  $m => $m $v"$'\n'
  elif [[ -n "${pinned[$m]:-}" ]]; then
    cat "$WORK/list.err" >&2
    die "KCP_STAGING_VERSIONS pins $m@$v, which the module proxy does not serve"
  else
    say "$m@$v is not served by the module proxy ($(head -n1 "$WORK/list.err")); using an empty stub"
    stub="stub/${m//\//_}"
    mkdir -p "$stub"
    printf 'module %s\n\ngo %s\n' "$m" "$go_directive" > "$stub/go.mod"
    staging_replaces+="  $m => ./$stub"$'\n'
    stubbed+=" $m@$v"
  fi
done

{
  echo "module relsync.local/kcp"
  echo
  echo "go $go_directive"
  echo
  echo "require github.com/kcp-dev/kcp $KCP_VERSION"
  echo
  echo "replace ("
  printf '%s\n' "$fork_replaces" | sed 's/^/  /'
  printf '%s' "$staging_replaces"
  echo ")"
} > go.mod
tools_go github.com/kcp-dev/kcp/cmd/cache-server github.com/kcp-dev/kcp/cmd/kcp github.com/kcp-dev/kcp/cmd/kcp-front-proxy

# kcp's own go.sum pins the hashes of its dependencies, including the Kubernetes
# fork pseudo-versions, which the checksum database may not know (a lookup there
# answers 404 and the build stops with "verifying module").
cp "$srcdir/go.sum" go.sum
chmod u+w go.sum
pinned_sum_lines >> go.sum
say "resolving modules (kubernetes fork $kube_version, go $go_directive)"
go mod tidy -e >&2 || true
go mod download >&2

major="${kube_version#v}"; major="${major%%.*}"
minor="${kube_version#v*.}"; minor="${minor%%.*}"
ldflags="$(kube_ldflags "${kube_version}+kcp-${KCP_VERSION}" "$major" "$minor" "${commit:-unknown}")"

start=$(date +%s)
mkdir -p "$OUT"
# Only those missing: a cache from before the multi-shard commands keeps its kcp.
for c in "${MISSING[@]}"; do
  say "building $c $KCP_VERSION (kcp itself takes many minutes on 2 cores)"
  if ! go_build "$c" "github.com/kcp-dev/kcp/cmd/$c" "$ldflags"; then
    [[ -z "$stubbed" ]] || say "these staging modules were stubbed because the proxy does not serve them:$stubbed; pin a served version with KCP_STAGING_VERSIONS=\"module@version\""
    die "go build of github.com/kcp-dev/kcp/cmd/$c@$KCP_VERSION failed (work dir kept: $WORK)"
  fi
done
{
  echo "kcp $KCP_VERSION ($commit)"
  echo "kubernetes $kube_version"
  printf '%s' "$staging_replaces" | sed 's/^ *//'
} > "$OUT/kcp.version"
built "$start"
