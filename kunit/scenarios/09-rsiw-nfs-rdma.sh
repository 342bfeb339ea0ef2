# timeout: 300
# NFS over RDMA on rsiw with the kernel's own ULPs: the C rpcrdma client and the C svcrdma
# server, both on rsiw1 (198.18.0.2). Mounts NFSv4.1 and NFSv3 with proto=rdma, writes
# 300 KiB and 4 MiB files, remounts, reads them back and compares.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start

for vers in 4.1 3; do
  mkdir -p /mnt/nfs
  timeout 60 mount -t nfs -o vers=$vers,proto=rdma,port=20049 $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers proto=rdma over rsiw failed"
  grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
  dd if=/dev/urandom of=/tmp/data bs=1k count=300 2>/dev/null
  dd if=/dev/urandom of=/tmp/big bs=1M count=4 2>/dev/null
  timeout 60 cp /tmp/data /mnt/nfs/data.$vers || fail "write over NFSv$vers/RDMA on rsiw"
  timeout 60 cp /tmp/big /mnt/nfs/big.$vers || fail "big write over NFSv$vers/RDMA on rsiw"
  echo "small file $vers" >/mnt/nfs/small.$vers
  timeout 60 umount /mnt/nfs || fail "umount"
  timeout 60 mount -t nfs -o vers=$vers,proto=rdma,port=20049 $ADDR1:/srv/export /mnt/nfs ||
    fail "remount vers=$vers"
  timeout 60 cmp /tmp/data /mnt/nfs/data.$vers || fail "data read back over NFSv$vers/RDMA on rsiw differs"
  timeout 60 cmp /tmp/big /mnt/nfs/big.$vers || fail "4 MiB read back over NFSv$vers/RDMA on rsiw differs"
  [ "$(cat /mnt/nfs/small.$vers)" = "small file $vers" ] || fail "small file differs"
  echo "NFSv$vers over C rpcrdma/rsiw: 300 KiB and 4 MiB written, read back and compared"
  timeout 60 umount /mnt/nfs || fail "umount"
done
nfs_server_stop
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
left_behind "after NFS over rsiw"
