# timeout: 180
# demo: NFS over rsiw (rpcrdma2, RPC-over-RDMA Version 2), a file written, read back and compared
# NFSv4.1 over RDMA on rsiw with rpcrdma2's client and its server in one kernel (as scenario 19
# loads them): rpcrdma2 with version=2 registers both classes "rdma", nfsd listens on
# "rdma 20049" and the mount goes through rsiw1 (the client connects to the device's own
# address). A 1 MiB file is written, the export remounted, the file read back and compared; the
# transport's mountstats line shows Version 2 with RDMA2_CONNPROP both ways, the file pulled by
# RDMA Read (Read chunks) and pushed back by RDMA Write (Write chunks).
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
! grep -q '^rpcrdma ' /proc/modules || fail "the C rpcrdma is loaded"
NFS_RDMA_MODULE=rpcrdma2
dmesg -c >/dev/null
modprobe rpcrdma2 version=2 || fail "modprobe rpcrdma2 version=2"
nfs_server_start >/dev/null
grep -q '^rdma 20049' /proc/fs/nfsd/portlist || fail "no rdma listener in nfsd's portlist"
wait_port 20049 || fail "nothing listens on 20049"

# xprt: the transport's mountstats line for /mnt/nfs, as positional parameters ($2: rdma;
# $13-$16: Read, Write and Reply chunks, bytes pulled by RDMA Read; $30: RPC-over-RDMA
# version; $32, $33: RDMA2_CONNPROP sent and received).
xprt() {
  grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
}
opts=vers=4.1,proto=rdma,port=20049
mkdir -p /mnt/nfs
dd if=/dev/urandom of=/tmp/file bs=1M count=1 2>/dev/null
start=$(date +%s)
timeout 60 mount -t nfs -o $opts $ADDR1:/srv/export /mnt/nfs || fail "mount $opts over rsiw"
grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
timeout 60 cp /tmp/file /mnt/nfs/file || fail "writing 1 MiB over NFS/RDMA"
timeout 60 sync
set -- $(xprt)
[ "$2" = rdma ] || fail "mountstats: $*"
[ "${30}" = 2 ] || fail "the connection speaks RPC-over-RDMA version ${30}, not 2: $*"
[ "${32}" -ge 1 ] && [ "${33}" -ge 1 ] || fail "RDMA2_CONNPROP did not go both ways: $*"
[ "${16}" -ge $((1 << 20)) ] || fail "the server pulled ${16} bytes by RDMA Read for a 1 MiB file: $*"
echo "mounted $ADDR1:/srv/export over rsiw1 ($opts), RPC-over-RDMA version ${30}, RDMA2_CONNPROP ${32} sent and ${33} received"
echo "1 MiB written: ${13} Read chunks, ${16} bytes pulled by the server's RDMA Reads"
timeout 60 umount /mnt/nfs || fail "umount"
timeout 60 mount -t nfs -o $opts $ADDR1:/srv/export /mnt/nfs || fail "remount $opts over rsiw"
timeout 60 cmp /tmp/file /mnt/nfs/file || fail "the file read back over NFS/RDMA differs"
cmp /tmp/file /srv/export/file || fail "the server's copy differs"
set -- $(xprt)
[ "${14}" -gt 0 ] || fail "no Write chunk used by the read: $*"
echo "1 MiB read back after a remount: ${14} Write chunks; identical to the original and to the server's copy ($(( $(date +%s) - start ))s)"
timeout 60 umount /mnt/nfs || fail "umount"
dmesg | grep -q 'rpcrdma2: .*speaks RPC-over-RDMA v2' || fail "the server did not log a Version 2 client"
rm -f /srv/export/file
rdma2_server_stop
left_behind "after NFS over rsiw"
