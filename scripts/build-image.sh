#!/usr/bin/env bash
# Build the VM's initramfs from the machine's installed Debian packages: busybox, iproute2,
# rdma-core (+ providers), perftest, rdmacm-utils, nfs-utils, fio, iperf3, nvme-cli, tcpdump,
# the kernel's modules and ours, the guest init and the scenario scripts. RSIW_IMAGE (see
# env.sh) is where it goes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

out="$RSIW_IMAGE"
root="$out/root"
krel=$(make -s -C "$KTREE" kernelrelease)
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,var/lib/nfs,var/run,root,mnt,srv,lib64,usr/bin,usr/sbin}

bins=(
  /usr/bin/busybox /usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devices /usr/bin/ibv_devinfo
  /usr/bin/ibv_rc_pingpong /usr/bin/rping /usr/bin/ib_write_bw /usr/bin/ib_read_bw
  /usr/bin/ib_send_bw /usr/bin/ib_send_lat /usr/bin/ib_write_lat /usr/bin/ib_read_lat
  /usr/sbin/mount.nfs /usr/sbin/rpc.nfsd /usr/sbin/exportfs /usr/sbin/rpc.mountd
  /usr/sbin/rpcbind /usr/sbin/rpc.statd /usr/sbin/nfsstat /usr/bin/fio /usr/bin/iperf3
  /usr/sbin/nvme /usr/bin/tcpdump /usr/bin/ss /usr/bin/nstat /usr/sbin/modprobe /usr/sbin/depmod /usr/bin/kmod
)
libs=(/usr/lib/x86_64-linux-gnu/libibverbs/*.so)

copy() { # copy a file to the same path under $root, following links, keeping the link name
  local f=$1
  [ -e "$root$f" ] && return 0
  mkdir -p "$root$(dirname "$f")"
  cp -L "$f" "$root$f"
}
# Our user-space test tools, built here against the installed libibverbs.
mkdir -p "$out/tools"
gcc -O2 -Wall -Werror -o "$out/tools/verbs-check" "$RSIW_TOP/kunit/tools/verbs-check.c" -libverbs
bins+=("$out/tools/verbs-check")
gcc -O2 -Wall -Werror -o "$out/tools/srq-limit" "$RSIW_TOP/kunit/tools/srq-limit.c" -libverbs -lrdmacm
bins+=("$out/tools/srq-limit")
gcc -O2 -Wall -Werror -o "$out/tools/read-sges" "$RSIW_TOP/kunit/tools/read-sges.c" -libverbs -lrdmacm
bins+=("$out/tools/read-sges")
gcc -O2 -Wall -Werror -o "$out/tools/bad-sqe" "$RSIW_TOP/kunit/tools/bad-sqe.c" -libverbs
bins+=("$out/tools/bad-sqe")
gcc -O2 -Wall -Werror -o "$out/tools/stale-lkey" "$RSIW_TOP/kunit/tools/stale-lkey.c" -libverbs -lrdmacm
bins+=("$out/tools/stale-lkey")
gcc -O2 -Wall -Werror -o "$out/tools/reg-mr-abuse" "$RSIW_TOP/kunit/tools/reg-mr-abuse.c" -libverbs
bins+=("$out/tools/reg-mr-abuse")
gcc -O2 -Wall -Werror -o "$out/tools/verbs-churn" "$RSIW_TOP/kunit/tools/verbs-churn.c" -libverbs -lrdmacm -lpthread
bins+=("$out/tools/verbs-churn")
gcc -O2 -Wall -Werror -o "$out/tools/cm-cycles" "$RSIW_TOP/kunit/tools/cm-cycles.c" -libverbs -lrdmacm
bins+=("$out/tools/cm-cycles")
gcc -O2 -Wall -Werror -o "$out/tools/mpa-trickle" "$RSIW_TOP/kunit/tools/mpa-trickle.c"
bins+=("$out/tools/mpa-trickle")
gcc -O2 -Wall -Werror -o "$out/tools/qp-hold" "$RSIW_TOP/kunit/tools/qp-hold.c" -libverbs -lrdmacm
bins+=("$out/tools/qp-hold")

for f in "${bins[@]}" "${libs[@]}"; do
  copy "$f"
  # ldd fails on static binaries (busybox): they need nothing.
  { ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\s*\/lib/{print $1}' |
    while read -r l; do copy "$l"; done
done
copy /lib64/ld-linux-x86-64.so.2
install -m 0755 "$out/tools/verbs-check" "$root/usr/bin/verbs-check"
install -m 0755 "$out/tools/srq-limit" "$root/usr/bin/srq-limit"
install -m 0755 "$out/tools/read-sges" "$root/usr/bin/read-sges"
install -m 0755 "$out/tools/bad-sqe" "$root/usr/bin/bad-sqe"
install -m 0755 "$out/tools/stale-lkey" "$root/usr/bin/stale-lkey"
install -m 0755 "$out/tools/reg-mr-abuse" "$root/usr/bin/reg-mr-abuse"
install -m 0755 "$out/tools/verbs-churn" "$root/usr/bin/verbs-churn"
install -m 0755 "$out/tools/cm-cycles" "$root/usr/bin/cm-cycles"
install -m 0755 "$out/tools/mpa-trickle" "$root/usr/bin/mpa-trickle"
install -m 0755 "$out/tools/qp-hold" "$root/usr/bin/qp-hold"
# mount.nfs is setuid-style and the kernel calls /sbin/mount.nfs*; modprobe is looked up in /sbin.
ln -sf /usr/sbin/mount.nfs "$root/sbin/mount.nfs"
ln -sf /usr/sbin/mount.nfs "$root/sbin/mount.nfs4"
ln -sf /usr/sbin/modprobe "$root/sbin/modprobe"
for a in $(/usr/bin/busybox --list); do
  [ -e "$root/bin/$a" ] || [ -e "$root/usr/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || ln -s /usr/bin/busybox "$root/bin/$a"
done

# rdma-core's test suite (scenario 21-rdma-core-tests): Debian's python3 with its standard
# library (less what no test imports: tkinter, the test packages, the static library), and the
# rdma-core build of rdma-core-suite.sh at /opt/rdma-core (libibverbs, librdmacm, the providers,
# pyverbs, tests/), which the scenario uses in place of Debian's libraries.
"$here/rdma-core-suite.sh" build
stage="${RDMA_CORE_SUITE:-$RSIW_CACHE/rdma-core-suite}/stage"
rcs=$stage/opt/rdma-core
mkdir -p "$root/usr/lib" "$root/opt/rdma-core/share" "$root/etc/opt/rdma-core"
copy /usr/bin/python3.11
ln -sf python3.11 "$root/usr/bin/python3"
rsync -a --exclude '/config-*' --exclude '/test/' --exclude '/idlelib/' --exclude '/tkinter/' \
  --exclude '/turtledemo/' --exclude '/lib2to3/' --exclude '/ensurepip/' --exclude '/pydoc_data/' \
  --exclude '/dist-packages/' --exclude '/site-packages/' --exclude '_tkinter*' --exclude '_test*' \
  --exclude '_curses*' --exclude '_dbm*' --exclude '_sqlite3*' --exclude 'readline*' \
  --exclude '__pycache__/*.opt-?.pyc' /usr/lib/python3.11/ "$root/usr/lib/python3.11/"
rsync -a --exclude '/lib/pkgconfig/' --exclude '/lib/systemd/' --exclude '/lib/udev/' \
  --exclude '/lib/rsocket/' --exclude '/lib/ibacm/' "$rcs/lib" "$rcs/python" "$root/opt/rdma-core/"
# Its libibverbs reads its providers' files from /etc/opt/rdma-core (CMake's GNUInstallDirs).
rsync -a "$stage/etc/opt/rdma-core/libibverbs.d" "$root/etc/opt/rdma-core/"
rsync -a "$rcs/share/doc/rdma-core/tests" "$root/opt/rdma-core/share/"
install -m 0644 "$RSIW_TOP/kunit/rdma-core/run-suite.py" "$root/opt/rdma-core/run-suite.py"
find "$root/opt/rdma-core" -name '*.so*' -type f -exec strip --strip-unneeded {} +
# What the suite's and python's shared objects need from the machine (rdma-core's own are there).
{ echo /usr/bin/python3.11
  find "$root/opt/rdma-core" "$root/usr/lib/python3.11/lib-dynload" -name '*.so*' -type f; } |
  while read -r so; do
    { LD_LIBRARY_PATH="$rcs/lib" ldd "$so" 2>/dev/null || true; } |
      awk -v own="$rcs/" '/=> \// && index($3, own) != 1 {print $3}' | while read -r l; do copy "$l"; done
  done

# Configuration the tools read.
cp -r /etc/libibverbs.d "$root/etc/"
for f in /etc/netconfig /etc/services /etc/protocols /etc/rpc; do [ -f "$f" ] && cp "$f" "$root/etc/"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nstatd:x:101:65534::/var/lib/nfs:/bin/false\n_rpc:x:102:65534::/run/rpcbind:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf 'hosts: files\npasswd: files\ngroup: files\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n' >"$root/etc/hosts"

# Kernel modules: the tree's, stripped, plus ours under extra/.
kmake -s INSTALL_MOD_PATH="$root" INSTALL_MOD_STRIP=1 DEPMOD=/bin/true modules_install >/dev/null
mkdir -p "$root/lib/modules/$krel/extra"
# Only what this build produced (modules.order), not stale objects of removed modules.
sed 's/\.o$/.ko/' "$RSIW_CACHE/modules-src/modules.order" | while read -r ko; do
  case "$ko" in /*) ;; *) ko="$RSIW_CACHE/modules-src/$ko" ;; esac
  cp "$ko" "$root/lib/modules/$krel/extra/"
done
rm -f "$root/lib/modules/$krel/build" "$root/lib/modules/$krel/source"
depmod -b "$root" "$krel"

# The guest side of the test run.
install -m 0755 "$RSIW_TOP/kunit/guest/init" "$root/init"
mkdir -p "$root/tests"
cp "$RSIW_TOP"/kunit/scenarios/*.sh "$root/tests/" 2>/dev/null || true
cp "$RSIW_TOP/kunit/expected-suites" "$root/tests/expected-suites"
# The scenarios of a pair run (scripts/run-pair.sh) and their helpers.
mkdir -p "$root/pair"
cp "$RSIW_TOP"/kunit/pair/*.sh "$root/pair/"
# The pair run's benchmarks (run-pair.sh DIR bench, from bench.sh).
mkdir -p "$root/pair-bench"
cp "$RSIW_TOP"/kunit/pair-bench/*.sh "$root/pair-bench/"
mkdir -p "$root/demo"
cp "$RSIW_TOP"/kunit/demo/*.sh "$root/demo/"
mkdir -p "$root/bench"
cp "$RSIW_TOP"/kunit/bench/*.sh "$root/bench/"
mkdir -p "$root/profile"
cp "$RSIW_TOP"/kunit/profile/*.sh "$root/profile/"

(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) >"$out/initramfs.cpio"
echo "build-image: $out/initramfs.cpio ($(du -h "$out/initramfs.cpio" | cut -f1))"
