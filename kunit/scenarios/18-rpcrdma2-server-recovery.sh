# timeout: 480
# The rpcrdma2 server ("rdma2" beside the C rpcrdma, coexist=1) loses what its clients are
# connected through, with the stock C client mounted over rsiw (its default rsize/wsize: reads
# of a 4 MiB file come back in Write chunks, writes go out in Read chunks):
#   1. the device goes (rdma link del) under a reader: the server's ib_client closes the
#      connection and the removal returns promptly; the device comes back and the client's I/O
#      resumes on a new connection to the same listener (it listens on every address);
#   2. nfsd stops with the client mounted: the listener and the connection close; nfsd starts
#      again, the client reconnects and reads and writes again;
# and nothing is left behind once nfsd stopped and the module unloaded.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start
modprobe rpcrdma2 coexist=1 || fail "modprobe rpcrdma2 coexist=1"
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
listen_rdma2() {
  echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
  wait_port 20050 || fail "nothing listens on 20050"
}
listen_rdma2

opts=vers=4.1,proto=rdma,port=20050
mkdir -p /mnt/nfs
timeout 60 mount -t nfs -o $opts $ADDR1:/srv/export /mnt/nfs || fail "mount $opts"
dd if=/dev/urandom of=/tmp/four bs=1M count=4 2>/dev/null
timeout 60 cp /tmp/four /mnt/nfs/four || fail "4 MiB write"

# 1. Device removal under a reader.
( while :; do
  echo 3 >/proc/sys/vm/drop_caches
  cat /mnt/nfs/four >/dev/null 2>&1 || true
done ) &
reader=$!
sleep 2
t0=$(now)
timeout 60 rdma link del rsiw1 || fail "rdma link del rsiw1 under a connected client"
t1=$(now)
echo "rdma link del rsiw1 with a client connected returned in $(since $t0 $t1) s"
dmesg | grep 'rpcrdma2: closing a connection' | tail -n 3
dmesg | grep -q 'rpcrdma2: closing a connection: the device is being removed' ||
  fail "the server's connection was not closed by the device removal"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1 again"
wait_port 20050 || fail "the listener does not listen on the new device"
t0=$(now)
timeout 120 cmp /tmp/four /mnt/nfs/four || fail "the client did not recover after the device came back"
t1=$(now)
echo "device back: the client read the file again after $(since $t0 $t1) s"
kill $reader 2>/dev/null || true
wait $reader 2>/dev/null || true

# 2. nfsd stops with the client mounted, and starts again.
rpc.nfsd 0 || fail "rpc.nfsd 0"
wait_port_free 20050 || fail "the rdma2 listener outlives nfsd"
for res in qp cm_id; do
  n=$(rdma resource show $res 2>/dev/null | grep -c 'rpcrdma2\|src-addr.*:20050' || true)
  [ "$n" = 0 ] || { rdma resource show $res; fail "$n ${res}s of the server left with nfsd stopped"; }
done
rpc.nfsd 4 || fail "rpc.nfsd 4"
echo 'rdma 20049' >/proc/fs/nfsd/portlist
listen_rdma2
t0=$(now)
timeout 120 cmp /tmp/four /mnt/nfs/four || fail "no read after nfsd restarted"
t1=$(now)
echo "nfsd back: the client read the file again after $(since $t0 $t1) s"
echo "after nfsd restarted" >/tmp/after
timeout 60 cp /tmp/after /mnt/nfs/after || fail "no write after nfsd restarted"
cmp /tmp/after /srv/export/after || fail "the server's copy of the new file differs"
timeout 60 umount /mnt/nfs || fail "umount"

rdma2_server_stop
left_behind "after the rpcrdma2 server's recovery"
echo "rpcrdma2 server: device removal and nfsd restart with the C client connected"
