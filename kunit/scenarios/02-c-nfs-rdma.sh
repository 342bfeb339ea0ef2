# timeout: 300
# NFS over RDMA with nothing of ours: the kernel's C rpcrdma client and server over the C siw.
# Mounts NFSv4.1 with proto=rdma, writes, reads back and compares, then NFSv3 likewise.
# With RSIW_CAPTURE set (a directory shared with the host), the RDMA traffic is captured
# with tcpdump for the RPC-over-RDMA fixtures of the host tests.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw0 type siw netdev dummy0
rdma link add siw1 type siw netdev dummy1
nfs_server_start
if [ -n "${RSIW_CAPTURE:-}" ]; then
  tcpdump -Z root -i lo -s 0 -U -w "$RSIW_CAPTURE/nfs-rdma-siw.pcap" tcp port 20049 2>/tmp/tcpdump.log &
  tcpdump_pid=$!
  sleep 1
fi

for vers in 4.1 3; do
  mkdir -p /mnt/nfs
  mount -t nfs -o vers=$vers,proto=rdma,port=20049 $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers proto=rdma failed"
  grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
  dd if=/dev/urandom of=/tmp/data bs=1k count=300 2>/dev/null
  cp /tmp/data /mnt/nfs/data.$vers
  echo "small file $vers" >/mnt/nfs/small.$vers
  ls -l /mnt/nfs >/dev/null
  umount /mnt/nfs
  mount -t nfs -o vers=$vers,proto=rdma,port=20049 $ADDR1:/srv/export /mnt/nfs
  cmp /tmp/data /mnt/nfs/data.$vers || fail "data read back over NFSv$vers/RDMA differs"
  [ "$(cat /mnt/nfs/small.$vers)" = "small file $vers" ] || fail "small file differs"
  echo "NFSv$vers over C rpcrdma/C siw: 300 KiB written, read back and compared"
  umount /mnt/nfs
done
if [ -n "${tcpdump_pid:-}" ]; then
  kill $tcpdump_pid || { cat /tmp/tcpdump.log; fail "tcpdump died"; }
  wait $tcpdump_pid 2>/dev/null || true
  cat /tmp/tcpdump.log
fi
nfs_server_stop
rdma link del siw1
rdma link del siw0
