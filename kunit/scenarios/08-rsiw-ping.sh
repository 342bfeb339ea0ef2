# timeout: 240
# rsiw as a kernel-verbs iWARP device: the KUnit suite rsiw_ping runs the kernel RDMA ping
# over rsiw0 (198.18.0.1) with itself, and with the C siw (siw1, 198.18.0.2) on the wire in
# both directions, through rdma_cm and iw_cm. Then the sample runs on rsiw0 and is unloaded
# under traffic, and rsiw0 is deleted. Nothing may be left behind, nothing may hang.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"

modprobe rsiw_ping_kunit || fail "loading the rsiw_ping suite"
left_behind "after the suite"

dmesg -c >/dev/null
modprobe rust_rdma_ping addr=$ADDR0 || fail "loading rust_rdma_ping on rsiw0"
sleep 3
start=$(date +%s)
timeout 30 modprobe -r rust_rdma_ping || fail "unloading rust_rdma_ping from rsiw0"
echo "unload under traffic: $(( $(date +%s) - start ))s"
dmesg | grep rust_rdma_ping
dmesg | grep -q 'stopped, [1-9][0-9]* rounds' || fail "no ping rounds on rsiw0"
left_behind "after the sample on rsiw0"
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
rdma link del siw1
