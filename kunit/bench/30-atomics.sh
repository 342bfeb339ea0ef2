# timeout: 300
# RFC 7306 atomics on rsiw (the C siw has none): the KUnit suite rsiw_atomics between rsiw0
# and rsiw1 prints the Fetch-and-Add rate of 4 QPs with 64 each in flight, and the round-trip
# latency of one Fetch-and-Add at a time; this collects them as BENCH lines.
. /tests/lib.sh
two_dummies
ip link add dummy2 type dummy
ip addr replace $ADDR2/32 dev dummy2
ip link set dummy2 up
modprobe rsiw
rdma link add rsiw0 type rsiw netdev dummy0
rdma link add rsiw1 type rsiw netdev dummy1
modprobe siw
rdma link add siw2 type siw netdev dummy2
dmesg -c >/dev/null
modprobe rsiw_atomics_kunit
dmesg | grep -o 'BENCH .*'
echo "BENCH atomic_fetch_add_rate_4qp ops/s siw missing"
echo "BENCH atomic_fetch_add_lat us siw missing"
rdma link del rsiw0
rdma link del rsiw1
rdma link del siw2
ip link del dummy2
