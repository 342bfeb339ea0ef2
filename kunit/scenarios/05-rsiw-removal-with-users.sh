# timeout: 120
# An rsiw device goes away while user space has it open: `rdma link del` and module unload
# complete at once (the user contexts are cut off), the process sees the device fail, and
# nothing is left behind.
. /tests/lib.sh
two_dummies

hold_open() { # start a process that keeps rsiw0 open, wait until it has it
  verbs-check rsiw0 --await-event active 60 >/tmp/ev.log 2>&1 &
  holder=$!
  for _ in $(seq 50); do grep -q ready /tmp/ev.log && return 0; sleep 0.1; done
  cat /tmp/ev.log; fail "verbs-check did not open rsiw0"
}

rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
hold_open
start=$(date +%s)
timeout 20 rdma link del rsiw0 || fail "rdma link del blocked by an open user context"
echo "rdma link del with a user context open: $(( $(date +%s) - start ))s"
[ ! -e /sys/class/infiniband/rsiw0 ] || fail "rsiw0 still there"
kill $holder 2>/dev/null || true
wait $holder 2>/dev/null || true
grep -q 'local catastrophic error\|device fatal' /tmp/ev.log && echo "the holder saw: $(grep event /tmp/ev.log | tail -1)"

rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0 again"
hold_open
start=$(date +%s)
timeout 20 modprobe -r rsiw || fail "module unload blocked by an open user context"
echo "rsiw unload with a user context open: $(( $(date +%s) - start ))s"
kill $holder 2>/dev/null || true
wait $holder 2>/dev/null || true
grep -q '^rsiw ' /proc/modules && fail "rsiw still loaded"
true
