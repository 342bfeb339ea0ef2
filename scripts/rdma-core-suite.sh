#!/usr/bin/env bash
# rdma-core's own test suite for the guest (scenario 21-rdma-core-tests):
#   fetch  - download PyPI's pyverbs source distribution (rdma-core's whole tree) with pip, at the
#            version and sha256 of kunit/rdma-core/requirements.txt, into $RDMA_CORE_SUITE
#   build  - fetch, unpack, apply kunit/rdma-core/patches/, build libibverbs, librdmacm, the
#            providers (siw's among them), pyverbs and tests/ with CMake, and install them under
#            the prefix /opt/rdma-core into $RDMA_CORE_SUITE/stage, which build-image.sh copies
#            into the guest at /opt/rdma-core
# A build is redone only when the tarball or a patch changes (a stamp of their hashes). Nothing
# of rdma-core is kept in this repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

: "${RDMA_CORE_SUITE:=$RSIW_CACHE/rdma-core-suite}"
req="$RSIW_TOP/kunit/rdma-core/requirements.txt"
patches="$RSIW_TOP/kunit/rdma-core/patches"
prefix=/opt/rdma-core
version=$(sed -n 's/^pyverbs==\([^ ]*\) .*/\1/p' "$req")
sha=$(sed -n 's/.*--hash=sha256:\([0-9a-f]*\).*/\1/p' "$req")
tarball="$RDMA_CORE_SUITE/pyverbs-$version.tar.gz"
mkdir -p "$RDMA_CORE_SUITE"

fetch() {
  if [ -f "$tarball" ] && echo "$sha  $tarball" | sha256sum -c --quiet - 2>/dev/null; then
    return 0
  fi
  rm -f "$tarball"
  echo "rdma-core-suite: downloading pyverbs $version (rdma-core's tree) from PyPI"
  # pip checks the hash of the requirements file (--require-hashes is implied by a hash).
  /usr/bin/python3 -m pip download --quiet --no-deps --no-binary pyverbs -r "$req" -d "$RDMA_CORE_SUITE"
  echo "$sha  $tarball" | sha256sum -c --quiet - ||
    { echo "rdma-core-suite: $tarball does not have sha256 $sha" >&2; rm -f "$tarball"; exit 1; }
}

build() {
  fetch
  local stamp want src=$RDMA_CORE_SUITE/src build=$RDMA_CORE_SUITE/build stage=$RDMA_CORE_SUITE/stage
  want=$( { echo "$sha"; cat "$patches"/*.patch 2>/dev/null; sed -n '/^build()/,/^}/p' "$0"; } | sha256sum | cut -d' ' -f1)
  stamp=$(cat "$RDMA_CORE_SUITE/stamp" 2>/dev/null || true)
  [ "$stamp" = "$want" ] && [ -d "$stage$prefix" ] && return 0
  echo "rdma-core-suite: building rdma-core $version with pyverbs and tests/ (a few minutes)"
  rm -rf "$src.new" "$stage" "$RDMA_CORE_SUITE/stamp"
  mkdir -p "$src.new"
  tar -xzf "$tarball" -C "$src.new" --strip-components=2 "pyverbs-$version/rdma-core"
  for p in "$patches"/*.patch; do
    [ -e "$p" ] || continue
    patch -d "$src.new" -p1 --quiet --no-backup-if-mismatch <"$p" ||
      { echo "rdma-core-suite: $(basename "$p") does not apply" >&2; exit 1; }
  done
  # Only files whose bytes changed get a new mtime: a changed patch rebuilds what it touches.
  rsync -rc --delete "$src.new/" "$src/"
  rm -rf "$src.new"
  # Debian's python3 and cython3 (the guest runs Debian's python3).
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNO_MAN_PAGES=1 \
    -DNO_PYVERBS=0 -DPYTHON_EXECUTABLE=/usr/bin/python3 -DCMAKE_INSTALL_PREFIX=$prefix \
    -DCMAKE_INSTALL_PYTHON_ARCH_LIB=$prefix/python >"$RDMA_CORE_SUITE/cmake.log" 2>&1 ||
    { tail -30 "$RDMA_CORE_SUITE/cmake.log" >&2; exit 1; }
  ninja -C "$build" -j"$JOBS" >"$RDMA_CORE_SUITE/ninja.log" 2>&1 ||
    { tail -40 "$RDMA_CORE_SUITE/ninja.log" >&2; exit 1; }
  DESTDIR="$stage" ninja -C "$build" install >"$RDMA_CORE_SUITE/install.log" 2>&1 ||
    { tail -30 "$RDMA_CORE_SUITE/install.log" >&2; exit 1; }
  echo "$want" >"$RDMA_CORE_SUITE/stamp"
  echo "rdma-core-suite: $stage$prefix"
}

case "${1:-}" in
  fetch) fetch ;;
  build) build ;;
  *) echo "usage: $0 fetch|build" >&2; exit 2 ;;
esac
