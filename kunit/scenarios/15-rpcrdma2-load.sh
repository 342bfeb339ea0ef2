# timeout: 240
# rpcrdma2 in one kernel: it registers the client transport "rdma" (ident 256), refuses to load
# beside the C rpcrdma, which holds the same ident, with a message that says so; a mount over it
# to an address where no server listens fails cleanly, and leaves no RDMA resource behind.
# (Mounts against real servers run across the two-guest rig: the C server is in the C rpcrdma.)
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"

# Earlier scenarios' NFS servers loaded the C rpcrdma (its svcrdma): it goes first.
modprobe -r rpcrdma 2>/dev/null || true
! grep -q '^rpcrdma ' /proc/modules || fail "the C rpcrdma cannot be unloaded: $(grep '^rpcrdma ' /proc/modules)"
modprobe rpcrdma2 || fail "modprobe rpcrdma2"
dmesg | grep -q 'rpcrdma2: client transport "rdma" registered' || fail "no registration message"

# NFSv4 needs no side protocol before its first call over the transport: the connect is
# refused (no listener on the port) and the mount fails instead of waiting.
mkdir -p /mnt/nfs
start=$(date +%s)
if timeout 120 mount -t nfs -o vers=4.0,proto=rdma,port=20049,retry=0 $ADDR1:/ /mnt/nfs 2>/tmp/mount.log; then
  fail "a mount with no server succeeded"
fi
echo "mount with no server: $(cat /tmp/mount.log) after $(( $(date +%s) - start ))s"
dmesg | grep 'rpcrdma2:' | tail -n 5
dmesg | grep -q 'rpcrdma2: connect.*' || fail "the transport never tried to connect"
# Transports go from a work item once their client let go of them.
for _ in $(seq 50); do
  modprobe -r rpcrdma2 2>/dev/null && break
  sleep 0.2
done
! grep -q '^rpcrdma2 ' /proc/modules || fail "rpcrdma2 still in use after the failed mount"
left_behind "after a refused rpcrdma2 mount"

# The C module holds ident 256 now: ours must refuse to load, and say why.
modprobe rpcrdma || fail "modprobe rpcrdma (C)"
if modprobe rpcrdma2 2>/tmp/modprobe.log || grep -q '^rpcrdma2 ' /proc/modules; then
  fail "rpcrdma2 loaded beside the C rpcrdma"
fi
cat /tmp/modprobe.log
dmesg | grep -q 'rpcrdma2: transport ident 256 .* by the C rpcrdma module' ||
  fail "no message saying why rpcrdma2 did not load"
modprobe -r rpcrdma || fail "unloading the C rpcrdma"
modprobe rpcrdma2 || fail "rpcrdma2 does not load again once the C module is gone"
modprobe -r rpcrdma2 || fail "unloading rpcrdma2"
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
echo "rpcrdma2: registered, refused beside the C rpcrdma, refused mount clean"
