# Helpers for scenario scripts (sourced). Addresses come from 198.18.0.0/15, the range set
# aside for benchmarking network devices (RFC 2544): the VM has no NIC, only dummy netdevs.
ADDR0=198.18.0.1
ADDR1=198.18.0.2

# two_dummies: dummy0 = $ADDR0, dummy1 = $ADDR1, both up.
two_dummies() {
  for i in 0 1; do
    ip link show dummy$i >/dev/null 2>&1 || ip link add dummy$i type dummy
    ip link set dummy$i up
  done
  ip addr replace $ADDR0/32 dev dummy0
  ip addr replace $ADDR1/32 dev dummy1
}

# wait_port PORT: until something listens on TCP PORT (max ~10 s).
wait_port() {
  for _ in $(seq 50); do
    netstat -ltn 2>/dev/null | grep -q ":$1 " && return 0
    sleep 0.2
  done
  echo "nothing listens on port $1"; return 1
}

fail() { echo "FAIL: $*"; exit 1; }
