# What scripts/build-{control-plane,kcp,helm,promtool}.sh share, sourced by each: a
# binary built from its Go module at a pinned version, through the Go module proxy,
# into a cache folder per version; the folder printed as the last line. Kept in one
# place because each rule matters to all four: the cache is the answer when every
# binary is there (nothing is built, `go` is not even needed), and a binary is put in
# place only once complete, so an interrupted build is never taken for a cached one.
# KUBEBUILDER_ASSETS is not read here: scripts/run-tests.mjs and test/harness take the
# binaries from it when it holds them, and run these scripts only for the rest.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/go-tool-cache.sh"
#   tool_cache helm "$HELM_VERSION" "${RELSYNC_HELM_CACHE:-}" helm
#   need go "to build helm"
#   go_install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
#   echo "$OUT"

# tool_cache TOOL VERSION CACHE_ROOT BINARY...
#   TOOL names the messages (build-TOOL: …) and the default cache root,
#   ${XDG_CACHE_HOME:-~/.cache}/relsync/TOOL (CACHE_ROOT, when not empty, instead).
#   Sets CACHE_ROOT, OUT (CACHE_ROOT/VERSION) and MISSING (the BINARYs not there);
#   with none missing, prints OUT and exits 0.
tool_cache() {
  TOOL="$1"
  local version="$2" root="$3" binary
  shift 3
  CACHE_ROOT="${root:-${XDG_CACHE_HOME:-$HOME/.cache}/relsync/$TOOL}"
  OUT="$CACHE_ROOT/$version"
  MISSING=()
  for binary in "$@"; do [[ -x "$OUT/$binary" ]] || MISSING+=("$binary"); done
  if [[ ${#MISSING[@]} -eq 0 ]]; then
    echo "$OUT"
    exit 0
  fi
}

say() { echo "build-$TOOL: $*" >&2; }
die() { say "$*"; exit 1; }

# need COMMAND WHY: stops with a message naming what COMMAND is needed for when it is missing.
need() { command -v "$1" >/dev/null || die "the '$1' command is required $2"; }

# go_install PACKAGE@VERSION [LDFLAGS]: `go install` of a module that builds as released (no
# replace directives to undo) into OUT.tmp, which then becomes OUT.
go_install() {
  mkdir -p "$OUT.tmp"
  GOBIN="$OUT.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "${2:--s -w}" "$1" >&2
  rm -rf "$OUT"
  mv "$OUT.tmp" "$OUT"
}

# work_dir VERSION: a fresh folder for a wrapper module (CACHE_ROOT/.build-VERSION), as WORK, entered.
work_dir() {
  WORK="$CACHE_ROOT/.build-$1"
  rm -rf "$WORK"
  mkdir -p "$WORK"
  cd "$WORK"
}

# tools_go PACKAGE...: the wrapper module's tools.go, whose imports keep the packages to build in
# the module graph that `go mod tidy` resolves.
tools_go() {
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    printf '\t_ "%s"\n' "$@"
    printf ')\n'
  } > tools.go
}

# kube_ldflags GIT_VERSION MAJOR MINOR [COMMIT]: -s -w and the version that component-base and
# client-go report (`--version`, /version), set as Kubernetes' own release build sets it.
kube_ldflags() {
  local pkg flags="-s -w" date
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$1${4:+ -X $pkg.gitCommit=$4} -X $pkg.gitMajor=$2 -X $pkg.gitMinor=$3"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  echo "$flags"
}

# go_build BINARY PACKAGE LDFLAGS: builds OUT/BINARY from the wrapper module in the current folder,
# through OUT/BINARY.tmp (removed when the build fails).
go_build() {
  mkdir -p "$OUT"
  if ! CGO_ENABLED=0 go build -trimpath -ldflags "$3" -o "$OUT/$1.tmp" "$2"; then
    rm -f "$OUT/$1.tmp"
    return 1
  fi
  mv "$OUT/$1.tmp" "$OUT/$1"
}

# built START: how long since START (date +%s), the build folder removed, OUT printed.
built() {
  say "built in $(( $(date +%s) - $1 ))s"
  [[ -z "${WORK:-}" ]] || rm -rf "$WORK"
  echo "$OUT"
}
