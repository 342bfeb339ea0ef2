# timeout: 300
# Malformed RPC-over-RDMA Version 1 headers against the rpcrdma2 server and the C svcrdma, over
# rsiw: the raw peer samples/rust/rust_rpcrdma_probe.rs connects to nfsd's "rdma2 20050"
# listener (rpcrdma2 coexist=1) and to its C "rdma 20049" one, sends each case's message and
# prints one verdict line per case (RFC 8166: ERR_VERS 1..1 for another version, ERR_CHUNK for a
# malformed header or chunk list, nothing for a message too short for a header; the connection
# survives every error). Its last case is the replay check: the same NFSv3 MKDIR, same XID,
# from the same source port over two connections in turn gets the same reply, the second from
# nfsd's duplicate reply cache (its "rc" hit counter moves). Any FAIL for rpcrdma2 fails the
# scenario; where the C server differs it is reported only. nfsd must still serve a mount over
# rdma2 afterwards.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start

modprobe rpcrdma2 coexist=1 || fail "modprobe rpcrdma2 coexist=1"
echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
wait_port 20050 || fail "nothing listens on 20050"
wait_port 20049 || fail "nothing listens on 20049"

# probe PORT: runs every case against $ADDR1:PORT and leaves the verdict lines in
# /tmp/probe.PORT.
probe() {
  modprobe rust_rpcrdma_probe addr=$ADDR1:$1 || fail "the probe does not run against port $1"
  modprobe -r rust_rpcrdma_probe || fail "the probe does not unload"
  dmesg | sed -n "/rust_rpcrdma_probe: [0-9]* cases against $ADDR1:$1\$/,/rust_rpcrdma_probe: done: /p" |
    sed 's/^\[[ 0-9.]*\] //' >/tmp/probe.$1
  cat /tmp/probe.$1
  grep -q 'rust_rpcrdma_probe: done: ' /tmp/probe.$1 || fail "the probe against port $1 did not finish"
}

# rc_hits: nfsd's duplicate reply cache hits so far.
rc_hits() { awk '$1 == "rc" { print $2 }' /proc/net/rpc/nfsd; }

echo "== rpcrdma2 server (rdma2, port 20050)"
hits=$(rc_hits)
probe 20050
echo "nfsd's reply cache hits: $hits before the probe, $(rc_hits) after"
[ "$(rc_hits)" -gt "$hits" ] || fail "the replayed MKDIR was not answered from nfsd's reply cache"
grep -q 'rust_rpcrdma_probe: replay: ok' /tmp/probe.20050 || fail "no replay check against rpcrdma2"
echo "== C svcrdma (rdma, port 20049), the reference"
probe 20049

echo "== differences"
for port in 20049 20050; do
  case $port in 20049) who="C svcrdma" ;; 20050) who=rpcrdma2 ;; esac
  grep ': FAIL (' /tmp/probe.$port | sed "s/^rust_rpcrdma_probe: /$who differs from RFC 8166: /" || true
done
grep 'rust_rpcrdma_probe: done: ' /tmp/probe.20049 | sed 's/^rust_rpcrdma_probe: done:/C svcrdma:/'
grep 'rust_rpcrdma_probe: done: ' /tmp/probe.20050 | sed 's/^rust_rpcrdma_probe: done:/rpcrdma2:/'
! grep -q ': FAIL (' /tmp/probe.20050 || fail "rpcrdma2 answered a case against RFC 8166"
grep -q 'rust_rpcrdma_probe: done: [1-9][0-9]* ok, 0 failed' /tmp/probe.20050 ||
  fail "no case ran against rpcrdma2"

# nfsd still serves over rdma2.
mkdir -p /mnt/nfs
timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20050,rsize=1024,wsize=1024 \
  $ADDR1:/srv/export /mnt/nfs || fail "mount over rdma2 after the probe"
echo "after the probe" >/mnt/nfs/probe || fail "write over rdma2 after the probe"
timeout 60 umount /mnt/nfs || fail "umount"
[ "$(cat /srv/export/probe)" = "after the probe" ] || fail "the file written after the probe differs"
echo "nfsd serves NFSv3 over rdma2 after the probe"

rdma2_server_stop
left_behind "after the probe"
echo "rpcrdma2 server: every malformed header answered as RFC 8166 says"
