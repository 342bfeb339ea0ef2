# timeout: 240
# rsiw as a kernel-verbs iWARP device: the KUnit suite rsiw_ping runs the kernel RDMA ping
# over rsiw0 (198.18.0.1) with itself, and with the C siw (siw1, 198.18.0.2) on the wire in
# both directions, through rdma_cm and iw_cm (with itself over IPv6 too): first with rsiw0's default MPA CRC setting
# (optional: no CRC, as the C siw does not ask), then again with mpa_crc=required (CRC on
# every connection, the C siw following). The device's settings refuse bad values. Then the
# sample runs on rsiw0 and is unloaded under traffic, and rsiw0 is deleted. Nothing may be
# left behind, nothing may hang.
. /tests/lib.sh
two_dummies
ip addr add fd00::1/128 dev dummy0 2>/dev/null || ip -6 addr show dev dummy0 | grep -q fd00::1 || fail "IPv6 address on dummy0"
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"

settings=/sys/class/infiniband/rsiw0
[ "$(cat $settings/mpa_crc)" = optional ] || fail "mpa_crc default: $(cat $settings/mpa_crc)"
[ "$(cat $settings/mpa_revision)" = 2 ] || fail "mpa_revision default"
[ "$(cat $settings/max_ird) $(cat $settings/max_ord)" = "128 128" ] || fail "IRD/ORD defaults"
for bad in "mpa_crc sometimes" "mpa_revision 3" "max_ird 0" "max_ord 129" "peer_to_peer 2" "rtr_kinds none"; do
  set -- $bad
  if echo $2 2>/dev/null >$settings/$1; then fail "$1 took $2"; fi
done
[ "$(cat $settings/mpa_crc)" = optional ] || fail "a refused write changed mpa_crc"

modprobe rsiw_ping_kunit || fail "loading the rsiw_ping suite"
results=/sys/kernel/debug/kunit/rsiw_ping/results
grep -q '^ok [0-9]* rsiw_ping' $results || { cat $results; fail "rsiw_ping without CRC"; }
echo "rsiw_ping without CRC: $(grep -c '^    ok' $results) cases passed"
modprobe -r rsiw_ping_kunit
left_behind "after the suite without CRC"

# Again with CRC required by rsiw0 (this run's results are the ones the test run collects).
echo required >$settings/mpa_crc || fail "setting mpa_crc"
[ "$(cat $settings/mpa_crc)" = required ] || fail "mpa_crc did not change"
modprobe rsiw_ping_kunit || fail "loading the rsiw_ping suite with CRC"
left_behind "after the suite with CRC"
echo optional >$settings/mpa_crc

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
# The module goes after all that traffic: its workqueue is drained and destroyed at unload.
timeout 30 modprobe -r rsiw || fail "unloading rsiw after traffic"
