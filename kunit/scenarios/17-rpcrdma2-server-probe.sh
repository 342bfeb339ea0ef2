# timeout: 300
# Malformed RPC-over-RDMA Version 1 headers against the rpcrdma2 server and the C svcrdma, over
# rsiw: the raw peer samples/rust/rust_rpcrdma_probe.rs connects to nfsd's "rdma2 20050"
# listener (rpcrdma2 coexist=1) and to its C "rdma 20049" one, sends each case's message and
# prints one verdict line per case (RFC 8166: ERR_VERS 1..1 for another version, ERR_CHUNK for a
# malformed header or chunk list, nothing for a message too short for a header; the connection
# survives every error). Its last case is the replay check: the same NFSv3 MKDIR, same XID,
# from the same source port over two connections in turn gets the same reply, the second from
# nfsd's duplicate reply cache (its "rc" hit counter moves). Any FAIL for rpcrdma2 fails the
# scenario; where the C server differs it is reported only. Then the probe speaks Version 2
# (version=2) to the rpcrdma2 server: transport properties (unknown, malformed, sent twice),
# malformed chunk lists, Message Continuation broken three ways, a first message over 1024
# bytes (the connection goes), and a credit overrun (every call answered or the connection
# goes; the server serves a new one): each must get the draft's error
# (draft-ietf-nfsv4-rpcrdma-version-two-01, sections 4.2, 5, 6.2.2 and 7). nfsd must still serve
# a mount over rdma2 afterwards.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start

modprobe rpcrdma2 coexist=1 || fail "modprobe rpcrdma2 coexist=1"
echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
wait_port 20050 || fail "nothing listens on 20050"
wait_port 20049 || fail "nothing listens on 20049"

# probe PORT [VERSION]: runs every case (of Version 1, or VERSION) against $ADDR1:PORT and
# leaves the verdict lines in /tmp/probe.PORT (/tmp/probe.PORT.v2 for Version 2).
probe() {
  local out=/tmp/probe.$1${2:+.v$2}
  modprobe rust_rpcrdma_probe addr=$ADDR1:$1 ${2:+version=$2} ||
    fail "the probe does not run against port $1"
  modprobe -r rust_rpcrdma_probe || fail "the probe does not unload"
  dmesg -c | sed -n "/rust_rpcrdma_probe: [0-9]* cases against $ADDR1:$1\$/,/rust_rpcrdma_probe: done: /p" |
    sed 's/^\[[ 0-9.]*\] //' >$out
  cat $out
  grep -q 'rust_rpcrdma_probe: done: ' $out || fail "the probe against port $1 did not finish"
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

echo "== rpcrdma2 server in Version 2 (rdma2, port 20050)"
probe 20050 2
grep 'rpcrdma2: .*first Version 2 message' /tmp/probe.20050.v2 || true
! grep -q ': FAIL (' /tmp/probe.20050.v2 || fail "rpcrdma2 answered a Version 2 case against the draft"
grep -q 'rust_rpcrdma_probe: done: [1-9][0-9]* ok, 0 failed' /tmp/probe.20050.v2 ||
  fail "no Version 2 case ran against rpcrdma2"

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
