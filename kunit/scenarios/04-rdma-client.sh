# timeout: 120
# The Rust RDMA consumer API against a real provider (the C siw) and against rsiw: the KUnit
# suite rust_rdma_client runs with siw1 and rsiw0 present; afterwards no PD or CQ is left.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
modprobe rust_rdma_client_kunit || fail "loading the rust_rdma_client suite"
for res in pd cq; do
  left=$(rdma resource show $res 2>/dev/null | grep -c . || true)
  [ "$left" = 0 ] || { rdma resource show $res; fail "$left ${res}s left behind"; }
done
# The module stays loaded: its results live in debugfs until it goes.
rdma link del rsiw0
rdma link del siw1
