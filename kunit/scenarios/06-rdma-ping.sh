# timeout: 240
# The Rust kernel RDMA ping (samples/rust/rust_rdma_ping*) over a provider nobody here wrote:
# the KUnit suite rust_rdma_ping on the C siw (siw1, 198.18.0.2); then the sample under traffic
# is unloaded, and its device deleted under traffic. Nothing may be left behind, nothing may
# hang.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"

modprobe rust_rdma_ping_kunit || fail "loading the rust_rdma_ping suite"

left_behind "after the suite"

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
