# timeout: 180
# RFC 7306 atomics on rsiw: the KUnit suite rsiw_atomics with rsiw0 (198.18.0.1, dummy0)
# as the requester, rsiw1 (198.18.0.2, dummy1) as the responder and the C siw2 (198.18.0.3,
# dummy2), which has no RFC 7306 and must make an atomic fail cleanly.
. /tests/lib.sh
two_dummies
ip link add dummy2 type dummy
ip addr replace $ADDR2/32 dev dummy2
ip link set dummy2 up
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
modprobe siw
rdma link add siw2 type siw netdev dummy2 || fail "rdma link add siw2"
modprobe rsiw_atomics_kunit || fail "loading the rsiw_atomics suite"
left_behind "after the suite"
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
rdma link del siw2
ip link del dummy2
