# Sourced by control-plane.sh and helm.sh (set LOG_TAG first): their logging, the Go toolchain
# check and the binary cache both share. Not a script of its own.
#
# The cache (GPUSCHED_K8S_CACHE, default /var/cache/gpusched/k8s) holds one directory per build
# key, filled by a build in a temporary .build-KEY.* directory under a per-tool lock and renamed
# into place, so an interrupted build never leaves a half-filled entry and two test runs that
# both need a tool build it once.

CACHE_ROOT=${GPUSCHED_K8S_CACHE:-/var/cache/gpusched/k8s}
JOBS=${GPUSCHED_K8S_BUILD_JOBS:-2}

log() { echo "$LOG_TAG: $*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
secs_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

need_go() {
    # install-deps.sh puts Go in /usr/local/go, which a fresh shell may not have on PATH.
    command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null || die "go not found on PATH; run scripts/install-deps.sh (it installs a Go toolchain)"
}

# cached_build TOOL KEY PROBE BUILD_FN: makes $CACHE_ROOT/KEY unless its file PROBE (relative,
# e.g. bin/helm) is already there. KEY must start with "TOOL-". BUILD_FN is called with the
# temporary directory to fill (the Go environment exported: no cgo, no workspace, read-only
# module graph) and may log its own steps; the build time is logged after it.
cached_build() {
    local tool=$1 key=$2 probe=$3 build_fn=$4
    local dest=$CACHE_ROOT/$key
    need_go
    mkdir -p "$CACHE_ROOT" 2>/dev/null || die "cannot create $CACHE_ROOT; set GPUSCHED_K8S_CACHE"
    if [ -x "$dest/$probe" ]; then
        log "$tool cached in $dest"
        return 0
    fi
    # One build of a tool at a time per cache (the plain and ASan ctest runs may both ask).
    exec 9>"$CACHE_ROOT/.lock-$tool"
    flock 9
    if [ -x "$dest/$probe" ]; then
        exec 9>&-
        log "$tool cached in $dest (built by another process)"
        return 0
    fi
    # Under the lock any .build-TOOL-* directory is left from a build that was killed (another
    # tool's build may be running: its directories are not ours to remove).
    rm -rf "$CACHE_ROOT"/.build-"$tool"-*
    local t0
    BUILD_TMP=$(mktemp -d "$CACHE_ROOT/.build-$key.XXXXXX")
    trap 'rm -rf "$BUILD_TMP"' EXIT
    t0=$(now_ms)
    export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly"
    "$build_fn" "$BUILD_TMP"
    chmod 755 "$BUILD_TMP" # mktemp made it 0700; the cache is for every user of the machine
    # A rename is atomic: an interrupted build leaves only a .build-* directory.
    mv "$BUILD_TMP" "$dest"
    trap - EXIT
    # Release the lock: daemons started next would otherwise inherit it and hold it.
    exec 9>&-
    log "build time $(secs_since "$t0") s; $tool in $dest"
}
