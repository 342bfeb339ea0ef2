# timeout: 120
# rsiw's MPA connection setup (proto/mpa_handshake.rs) against the C siw on the wire: the KUnit
# suite rsiw_mpa_interop drives the C siw (siw1, 198.18.0.2) through rdma_cm and speaks MPA on
# a kernel TCP socket, as initiator and as responder.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"
modprobe rsiw_mpa_interop_kunit || fail "loading the rsiw_mpa_interop suite"
left_behind "after the suite"
# The module stays loaded: its results live in debugfs.
rdma link del siw1
