# timeout: 120
# rsiw registers with the RDMA core: `rdma link add` loads the module (by its rdma-link alias)
# and creates an iWARP device bound to a netdev, whose node type, GUID, GID and port state
# follow the netdev, and that rdma-core's siw provider opens (ibv_devices, ibv_devinfo); the
# C siw and rsiw coexist on different netdevs; deleting the netdev,
# `rdma link del` and unloading the module remove the devices.
. /tests/lib.sh
two_dummies
sys=/sys/class/infiniband

rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
grep -q '^rsiw ' /proc/modules || fail "rdma link add did not load rsiw"
rdma link show rsiw0/1
rdma link show rsiw0/1 | grep -q 'state ACTIVE physical_state LINK_UP netdev dummy0' ||
  fail "rsiw0 port not active on dummy0"
[ "$(cat $sys/rsiw0/node_type)" = "4: RNIC" ] || fail "node type $(cat $sys/rsiw0/node_type)"

# GUID = EUI-64 of the MAC, GID = the MAC.
mac=$(cat /sys/class/net/dummy0/address)
set -- $(echo "$mac" | tr ':' ' ')
b0=$(printf '%02x' $(( 0x$1 ^ 2 )))
guid="$b0$2:$3ff:fe$4:$5$6"
[ "$(cat $sys/rsiw0/node_guid)" = "$guid" ] || fail "node_guid $(cat $sys/rsiw0/node_guid), want $guid"
gid="$1$2:$3$4:$5$6:0000:0000:0000:0000:0000"
[ "$(cat $sys/rsiw0/ports/1/gids/0)" = "$gid" ] || fail "gid $(cat $sys/rsiw0/ports/1/gids/0), want $gid"
echo "rsiw0: RNIC, node_guid $guid, gid $gid"

# User space sees it through rdma-core's stock siw provider (same driver id and ABI).
ibv_devices | grep -q "rsiw0" || { ibv_devices; fail "ibv_devices does not list rsiw0"; }
ibv_devinfo -d rsiw0 >/tmp/devinfo.log 2>&1 || { cat /tmp/devinfo.log; fail "ibv_devinfo -d rsiw0"; }
for want in 'transport:[[:space:]]*iWARP' 'vendor_part_id:[[:space:]]*29299' \
            'state:[[:space:]]*PORT_ACTIVE' "node_guid:[[:space:]]*$guid"; do
  grep -q "$want" /tmp/devinfo.log || { cat /tmp/devinfo.log; fail "ibv_devinfo: no '$want'"; }
done
grep -E 'transport|vendor_part_id|max_qp:|state' /tmp/devinfo.log
# Verbs from user space through the siw provider: PDs, CQs and RC QPs with their rings mapped
# into the process; an oversized CQ is refused; an unconnected QP goes through INIT, RTR, ERR
# and back, but not to RTS; nothing is left afterwards.
verbs-check rsiw0 64 cq cq-too-big qp-states || fail "verbs-check on rsiw0"
for res in pd cq qp; do
  left=$(rdma resource show $res dev rsiw0 2>/dev/null | grep -c . || true)
  [ "$left" = 0 ] || { rdma resource show $res; fail "$left ${res}s left on rsiw0"; }
done

# The port follows the netdev, and user space hears of it (asynchronous port events).
verbs-check rsiw0 --await-event err 10 >/tmp/ev.log 2>&1 &
for _ in $(seq 50); do grep -q ready /tmp/ev.log && break; sleep 0.1; done
ip link set dummy0 down
wait $! || { cat /tmp/ev.log; fail "no PORT_ERR event for dummy0 down"; }
[ "$(cat $sys/rsiw0/ports/1/state)" = "1: DOWN" ] || fail "port state $(cat $sys/rsiw0/ports/1/state) with dummy0 down"
verbs-check rsiw0 --await-event active 10 >/tmp/ev.log 2>&1 &
for _ in $(seq 50); do grep -q ready /tmp/ev.log && break; sleep 0.1; done
ip link set dummy0 up
wait $! || { cat /tmp/ev.log; fail "no PORT_ACTIVE event for dummy0 up"; }
grep event /tmp/ev.log
[ "$(cat $sys/rsiw0/ports/1/state)" = "4: ACTIVE" ] || fail "port state $(cat $sys/rsiw0/ports/1/state) with dummy0 up"

# Refused: a second device on the same netdev, and loopback.
! rdma link add rsiw9 type rsiw netdev dummy0 2>/dev/null || fail "second device on dummy0 accepted"
! rdma link add rsiw9 type rsiw netdev lo 2>/dev/null || fail "device on lo accepted"

# The C siw next to it, and the C siw refusing rsiw's netdev.
modprobe siw
rdma link add siw1 type siw netdev dummy1 || fail "siw1 next to rsiw0"
# The same user-space checks on the C siw, as the reference.
verbs-check siw1 64 cq cq-too-big qp || fail "verbs-check on the C siw"
! rdma link add siw9 type siw netdev dummy0 2>/dev/null || fail "siw accepted rsiw's netdev"
rdma link show

# Removal: the netdev going away takes the device with it (and does not hang waiting).
ip link del dummy0 || fail "deleting rsiw0's netdev"
for _ in $(seq 50); do [ -e $sys/rsiw0 ] || break; sleep 0.1; done
[ ! -e $sys/rsiw0 ] || fail "rsiw0 survived its netdev"
[ -e $sys/siw1 ] || fail "deleting dummy0 removed the C siw's device"
two_dummies
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rsiw0 on a new dummy0"

# Removal: by link del, then by unloading the module with a device present.
rdma link del rsiw0 || fail "rdma link del rsiw0"
[ ! -e $sys/rsiw0 ] || fail "rsiw0 still there after link del"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "re-adding rsiw0"
modprobe -r rsiw || fail "rsiw does not unload with a device"
[ ! -e $sys/rsiw0 ] || fail "rsiw0 survived the module"
[ -e $sys/siw1 ] || fail "unloading rsiw removed the C siw's device"

# The other way round: unloading the C siw unregisters every device of the siw driver id,
# rsiw's included; rsiw must take that like any other removal, and unload cleanly after.
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rsiw0 after reload"
rdma link del siw1
modprobe -r siw || fail "siw does not unload"
[ ! -e $sys/rsiw0 ] || fail "unloading siw left rsiw0 (ib_unregister_driver should take it)"
modprobe -r rsiw || fail "rsiw does not unload after the C siw took its device"
echo "rsiw link lifecycle: add, attributes, port state, refusals, coexistence, netdev removal, del, unload, C siw unload: ok"
