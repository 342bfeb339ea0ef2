#!/usr/bin/env bash
# Install everything the build, the VM image and the tests need: Debian packages, the Rust
# pieces Rust-for-Linux wants (rust-src, bindgen-cli), a nightly toolchain for `make fuzz`,
# then check that the kernel agrees that Rust is available. Idempotent: a rerun only checks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

# Pinned so an archive update cannot change the tree under the overlay; override to move on.
: "${LINUX_SOURCE_PKG:=linux-source-6.12=6.12.117-1~deb12u1}"

pkgs=(
  "$LINUX_SOURCE_PKG" clang lld llvm libclang-dev flex bison bc libelf-dev libssl-dev cpio
  busybox-static qemu-system-x86 ccache rdma-core ibverbs-utils ibverbs-providers rdmacm-utils
  perftest iproute2 nfs-kernel-server nfs-common fio iperf3 nvme-cli tcpdump kmod xz-utils
  libibverbs-dev librdmacm-dev gcc
  python3 rsync
  # tools/tcg-profile/critical-path.sh analyses its traces with numpy.
  python3-numpy
  # make bench draws bench-results.png with Debian's python3 and matplotlib.
  python3-matplotlib
  # rdma-core's test suite (scripts/rdma-core-suite.sh): pip fetches PyPI's pyverbs source
  # distribution; CMake builds rdma-core, pyverbs and tests/ from it.
  python3-pip python3-dev cython3 cmake ninja-build pkg-config libnl-3-dev libnl-route-3-dev
)

need_apt=0
for p in "${pkgs[@]}"; do
  name=${p%%=*}
  want=${p#*=}
  have=$(dpkg-query -W -f='${Status} ${Version}\n' "$name" 2>/dev/null || true)
  case "$have" in
    "install ok installed"*)
      [ "$want" = "$p" ] || [ "${have##* }" = "$want" ] || need_apt=1 ;;
    *) need_apt=1 ;;
  esac
done
if [ "$need_apt" = 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # nfs-kernel-server and rdma-core ship services; the image is built from their files only.
  apt-get install -y -q --no-install-recommends "${pkgs[@]}"
fi

# rdma-core's test suite for scenario 21, at the version and hash kunit/rdma-core/ pins.
"$here/rdma-core-suite.sh" build

command -v rustup >/dev/null || { echo "setup: rustup not found (need the machine's rustup toolchain)" >&2; exit 1; }
rustup component list --installed | grep -q '^rust-src' || rustup component add rust-src
# `make fuzz`: cargo-fuzz passes -Z flags to rustc, which only a nightly compiler takes.
rustup toolchain list | grep -E '^nightly(-| |$)' >/dev/null || rustup toolchain install nightly --profile minimal
if ! bindgen --version 2>/dev/null | grep -q '0\.71\.1'; then
  cargo install --locked bindgen-cli --version 0.71.1
fi

# The kernel's own verdict on the toolchain, on a throwaway extraction of its scripts.
"$here/kernel-tree.sh" extract
if ! make -C "$KTREE" LLVM=1 rustavailable >"$RSIW_CACHE/rustavailable.log" 2>&1; then
  echo "setup: 'make LLVM=1 rustavailable' failed — what is missing:" >&2
  cat "$RSIW_CACHE/rustavailable.log" >&2
  exit 1
fi
echo "setup: Rust is available ($(rustc --version), $(bindgen --version | head -1), $(clang --version | head -1))"
