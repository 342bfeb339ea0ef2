# timeout: 240
# The Rust kernel RDMA ping (samples/rust/rust_rdma_ping*) over providers nobody here wrote:
# the KUnit suite rust_rdma_ping on the C siw (siw1, 198.18.0.2) and the C rxe (rxe0,
# 198.18.0.1: also immediate data and atomics), the sample on rxe0; then the sample under
# traffic is unloaded, and its device deleted under traffic. Nothing may be left behind,
# nothing may hang.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0"
# RoCE GIDs for the netdev's addresses are added in the background: wait for 198.18.0.1's.
for _ in $(seq 50); do
  cat /sys/class/infiniband/rxe0/ports/1/gids/* | grep -q 'ffff:c612:0001' && break
  sleep 0.1
done

modprobe rust_rdma_ping_kunit || fail "loading the rust_rdma_ping suite"

left_behind "after the suite"

# The sample on the C rxe: each connection starts with immediate data and atomics.
dmesg -c >/dev/null
modprobe rust_rdma_ping addr=$ADDR0 || fail "loading rust_rdma_ping on rxe0"
sleep 2
timeout 30 modprobe -r rust_rdma_ping || fail "unloading rust_rdma_ping from rxe0"
dmesg | grep rust_rdma_ping
dmesg | grep -q 'immediate data and atomics verified' || fail "no immediate data and atomics on rxe0"
dmesg | grep -q 'stopped, [1-9][0-9]* rounds' || fail "no ping rounds on rxe0"
left_behind "after the sample on rxe0"
rdma link del rxe0

# Unload under traffic.
dmesg -c >/dev/null
modprobe rust_rdma_ping addr=$ADDR1 || fail "loading rust_rdma_ping"
sleep 3
start=$(date +%s)
timeout 30 modprobe -r rust_rdma_ping || fail "unloading rust_rdma_ping under traffic"
echo "unload under traffic: $(( $(date +%s) - start ))s"
dmesg | grep rust_rdma_ping
dmesg | grep -q 'stopped, [1-9][0-9]* rounds' || fail "no ping rounds before the unload"
left_behind "after unloading the sample"

# Delete the device under traffic; the sample keeps retrying without it.
dmesg -c >/dev/null
modprobe rust_rdma_ping addr=$ADDR1 || fail "loading rust_rdma_ping again"
sleep 3
start=$(date +%s)
timeout 30 rdma link del siw1 || fail "rdma link del siw1 under traffic"
echo "rdma link del under traffic: $(( $(date +%s) - start ))s"
sleep 1
timeout 30 modprobe -r rust_rdma_ping || fail "unloading rust_rdma_ping after the device went"
dmesg | grep rust_rdma_ping
dmesg | grep -q 'connection ended after [1-9][0-9]* rounds' || fail "no rounds before the device went"
left_behind "after deleting the device"
# rust_rdma_ping_kunit stays loaded: its results live in debugfs.
