# Shared settings for every script; sourced, never run. Everything here can be overridden from
# the environment, so CI or a developer can move the cache.

# Build cache outside the clone: the extracted, overlaid kernel tree, ccache, the VM image.
: "${RSIW_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/rsiw}"
: "${KSRC_TARBALL:=/usr/src/linux-source-6.12.tar.xz}"
: "${CCACHE_DIR:=$RSIW_CACHE/ccache}"
# Which kernel: `test` (lockdep and the other checks the tests rely on) or `bench` (the same
# kernel without the debugging that slows locks and with a 250 Hz tick, for `make bench`; see
# kunit/config/bench.config). The bench flavour keeps its tree, modules and image in a cache of
# its own and shares ccache.
: "${RSIW_FLAVOUR:=test}"
case "$RSIW_FLAVOUR" in
  test) ;;
  bench) case "$RSIW_CACHE" in */bench-kernel) ;; *) RSIW_CACHE=$RSIW_CACHE/bench-kernel ;; esac ;;
  *) echo "env: RSIW_FLAVOUR must be test or bench, not $RSIW_FLAVOUR" >&2; exit 2 ;;
esac
: "${KTREE:=$RSIW_CACHE/linux-source-6.12}"
# The VM image (initramfs) that build-image.sh writes and the run scripts boot; a second
# worktree can build and boot an image of its own without replacing this one.
: "${RSIW_IMAGE:=$RSIW_CACHE/image}"
: "${JOBS:=$(( $(nproc) + 1 ))}"
RSIW_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export RSIW_CACHE RSIW_IMAGE KSRC_TARBALL KTREE CCACHE_DIR JOBS RSIW_TOP RSIW_FLAVOUR
export PATH="$HOME/.cargo/bin:$PATH"
mkdir -p "$RSIW_CACHE" "$CCACHE_DIR"

# The kernel build line every script uses: clang/LLVM (Rust needs it). ccache sits in front of
# clang through Debian's masquerade directory (CC="ccache clang" would break rustc's -Clinker).
kmake() {
  PATH="/usr/lib/ccache:$PATH" make -C "$KTREE" LLVM=1 CLIPPY=1 -j"$JOBS" "$@"
}
