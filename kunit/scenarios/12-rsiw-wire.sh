# timeout: 300
# rsiw's driver against a crafted peer: the KUnit suite rsiw_wire listens through rdma_cm on
# rsiw0 (198.18.0.1) and plays the remote side with a kernel TCP socket: garbage and a
# markers request are refused before the ULP hears of them; on established connections a
# Send without a posted receive, an RDMA Write to an unknown STag and a bad DDP version get
# the TERMINATE the RFCs prescribe, and so do Atomic Requests with an unsupported AOpCode, a
# misaligned or out-of-bounds offset, an STag without remote-atomic access or an unknown
# STag (RFC 7306 section 8); each time the ULP sees the connection end. Peer-to-peer (RFC
# 6581): as responder rsiw takes each RTR kind (a Read RTR answered first) and refuses an RTR
# of a kind not negotiated or with payload with TERMINATE 2/0/7; as initiator (peer_to_peer
# set on rsiw0 for this) it sends its RTR first, and answers a reply with no usable RTR kind
# with TERMINATE 2/0/7. IRD/ORD (RFC 6581 section 9.1): as responder rsiw answers 0x3FFF
# with 0x3FFF, raises its IRD to the initiator's ORD (capped at max_ird) and caps its ORD at
# the initiator's IRD; as initiator it keeps its depths on a 0x3FFF reply and answers a
# responder ORD over max_ird with TERMINATE 2/0/6. Tagged access is checked when it happens: an
# RDMA Write whose second half arrives after the region was invalidated (and, separately,
# registered again under the same STag, invalidated by a Send with Invalidate on another
# connection, or replaced by another region at its index) places nothing more and gets DDP
# "invalid STag". A Read completes only when its responses placed every sink byte in order:
# one empty last segment, segments out of order, overlapping or short get DDP "base or
# bounds" and the Read an error completion; a Read Request whose sink or source range wraps
# 2^64 is refused on arrival (RDMAP "TO wrap"). An MPA Request trickled a byte a second is
# closed by the exchange's deadline. A QP whose transmission waits on a peer's zero window fails
# on that peer's malformed FPDU without waiting: its Writes flush, the ULP hears DISCONNECTED,
# and destroying the QP returns.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
echo 1 >/sys/class/infiniband/rsiw0/peer_to_peer || fail "peer_to_peer on rsiw0"
modprobe rsiw_wire_kunit || fail "loading the rsiw_wire suite"
left_behind "after the suite"
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
