# timeout: 900
# rsiw from user space: rdma-core's stock siw provider drives rsiw through the siw user ABI
# (mapped send, receive, shared receive and completion rings, the doorbell, user memory
# regions), with the stock tools, checked byte for byte where the tool can: rping -V (Send/Recv, RDMA Read and
# Write, data verified), perftest over rdma_cm (-R), an SRQ's limit event (srq-limit), a Read into 3 SGEs
# (read-sges), a Send through a deregistered key (stale-lkey), malformed
# queue entries written by the process itself (bad-sqe), and memory registrations that fail
# (reg-mr-abuse); CQs, QPs and SRQs created and destroyed in loops past the device's maximum
# (lowered to 300 in the test run), and a
# send ring rewritten by a second thread during the doorbell (verbs-churn). First rsiw with
# itself (rsiw0 on dummy0, rsiw1 on dummy1), then against the C siw on the wire in both directions (rsiw0 on
# dummy0, siw1 on dummy1), without and with MPA CRC. Nothing may be left behind.
. /tests/lib.sh
two_dummies
# The test run loads rsiw with device limits of 300 QPs, CQs and SRQs, so that verbs-churn
# goes past them in under a minute (past the design limits, 102400 each, takes about 25 minutes).
limits=; [ "$RSIW_MODE" = test ] && limits="max_qp=300 max_cq=300 max_srq=300"
modprobe -r rsiw 2>/dev/null
modprobe rsiw $limits || fail "modprobe rsiw $limits"
modprobe siw || fail "modprobe siw"

count=20; [ "$RSIW_MODE" = test ] || count=1000
iters=200; [ "$RSIW_MODE" = test ] || iters=5000

# rping_pair NAME SERVER_ADDR CLIENT_ADDR: rping -V, COUNT rounds of 4 KiB, data verified.
rping_pair() {
  wait_port_free 7174 || fail "$1: the previous rping's listener stayed"
  timeout 60 rping -s -a $2 -C $count -S 4096 -V >/tmp/rping-server.log 2>&1 &
  local server=$!
  wait_port 7174 $2 || fail "$1: rping server did not listen"
  timeout 60 rping -c -a $2 -I $3 -C $count -S 4096 -V -v >/tmp/rping-client.log 2>&1 || {
    cat /tmp/rping-client.log /tmp/rping-server.log; fail "$1: rping client failed"; }
  wait $server || { cat /tmp/rping-server.log; fail "$1: rping server failed"; }
  n=$(grep -c 'ping data' /tmp/rping-client.log)
  [ "$n" = "$count" ] || fail "$1: rping: expected $count pings, saw $n"
  echo "$1: rping $n rounds of 4096 bytes, verified"
}

# perf_pair NAME SERVER_DEV CLIENT_DEV SERVER_ADDR TOOL ARGS...: a perftest run over rdma_cm.
# The client binds to CLIENT_DEV's address: perftest's rdma_cm client takes the device its
# source address resolves to (`-d` does not choose it), so without one both ends would run on
# the server's device.
perf_pair() {
  local name=$1 sdev=$2 cdev=$3 addr=$4 tool=$5; shift 5
  local src start secs server
  src=$(addr_of $cdev) || fail "$name: $cdev has no IPv4 address"
  for attempt in 1 2; do
    wait_port_free 18515 || fail "$name: the previous run's listener stayed"
    timeout 120 $tool -R -d $sdev "$@" >/tmp/perf-server.log 2>&1 &
    server=$!
    # perftest's rdma_cm port: a client started before the server listens is refused.
    wait_port 18515 $addr || { cat /tmp/perf-server.log; fail "$name: $tool server did not listen"; }
    start=$(date +%s)
    timeout 120 $tool -R -d $cdev --source_ip $src "$@" $addr >/tmp/perf-client.log 2>&1 && break
    # perftest connects twice on its port: once for its own exchanges, then for the test, and
    # its server listens for the second only after an exchange over the first, which the
    # client may finish first. A client refused at once has met that race; the run (server
    # and client) is done once more, and the scenario says so. Anything else is a failure.
    if [ $attempt = 1 ] && [ $(( $(date +%s) - start )) -le 2 ] &&
        grep -q 'Connection refused' /tmp/perf-client.log; then
      echo "$name: $tool $*: connect refused, the run once more"
      kill $server 2>/dev/null; wait $server 2>/dev/null
      continue
    fi
    cat /tmp/perf-client.log /tmp/perf-server.log; fail "$name: $tool $* failed"
  done
  secs=$(( $(date +%s) - start ))
  wait $server || { cat /tmp/perf-server.log; fail "$name: $tool server failed"; }
  line=$(awk '$1 ~ /^[0-9]+$/ && NF >= 4 {l=$0} END {print l}' /tmp/perf-client.log)
  [ -n "$line" ] || { cat /tmp/perf-client.log; fail "$name: $tool printed no result line"; }
  # perftest's rates come from a CPU clock rate it estimates, which an emulated CPU can defeat
  # (it prints 0.00 then); the run's wall time tells a stalled transfer: a few MB take seconds.
  [ $secs -le 30 ] || {
    cat /tmp/perf-client.log /tmp/perf-server.log; dmesg | tail -30
    fail "$name: $tool $*: ${secs}s for the run (a stalled transfer)"; }
  echo "$name: $tool $*: $line (${secs}s)"
}

# cm_tool_pair NAME TOOL PORT SERVER_ADDR CLIENT_ADDR: one of our rdma_cm test tools
# (kunit/tools/), its server then its client; both must succeed. Logs: /tmp/TOOL-server.log and
# /tmp/TOOL-client.log.
cm_tool_pair() {
  local name=$1 tool=$2 port=$3
  wait_port_free $port || fail "$name: the previous run's listener stayed"
  timeout 60 $tool server $4 $port >/tmp/$tool-server.log 2>&1 &
  local server=$!
  wait_port $port $4 || { cat /tmp/$tool-server.log; fail "$name: $tool server did not listen"; }
  timeout 60 $tool client $4 $port $5 >/tmp/$tool-client.log 2>&1 || {
    cat /tmp/$tool-client.log /tmp/$tool-server.log; fail "$name: $tool client failed"; }
  wait $server || {
    cat /tmp/$tool-client.log /tmp/$tool-server.log; fail "$name: $tool server failed"; }
}

# srq_pair NAME SERVER_ADDR CLIENT_ADDR: the SRQ limit event (srq-limit.c).
srq_pair() {
  cm_tool_pair "$1" srq-limit 7471 $2 $3
  echo "$1: $(grep 'limit reached' /tmp/srq-limit-server.log)"
}

# sges_pair NAME SERVER_ADDR CLIENT_ADDR: an RDMA Read into 3 SGEs (read-sges.c).
sges_pair() {
  cm_tool_pair "$1" read-sges 7472 $2 $3
  echo "$1: $(cat /tmp/read-sges-client.log)"
}

# stale_pair NAME SERVER_ADDR CLIENT_ADDR: a Send through a deregistered local key fails, right
# after the key was used and with the memory registered again (stale-lkey.c).
stale_pair() {
  cm_tool_pair "$1" stale-lkey 7473 $2 $3
  echo "$1: $(cat /tmp/stale-lkey-client.log) / $(grep server: /tmp/stale-lkey-server.log)"
}

perf_all() {
  perf_pair "$1" $2 $3 $4 ib_write_bw -s 65536 -n $iters -F
  perf_pair "$1" $2 $3 $4 ib_read_bw -s 65536 -n $iters -F
  perf_pair "$1" $2 $3 $4 ib_send_bw -s 65536 -n $iters -F
  perf_pair "$1" $2 $3 $4 ib_send_lat -s 8 -n $iters -F
  perf_pair "$1" $2 $3 $4 ib_write_lat -s 8 -n $iters -F
  perf_pair "$1" $2 $3 $4 ib_read_lat -s 8 -n $iters -F
  # Receives from a shared receive queue (the siw ABI's mapped SRQ ring).
  perf_pair "$1" $2 $3 $4 ib_send_bw -s 65536 -n $iters -F --use-srq
  perf_pair "$1" $2 $3 $4 ib_send_lat -s 8 -n $iters -F --use-srq
}

rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
# Malformed entries written straight into the shared rings complete with errors.
bad-sqe rsiw0 >/tmp/bad-sqe.log 2>&1 || { cat /tmp/bad-sqe.log; fail "bad-sqe on rsiw0"; }
sed 's/^/bad-sqe: /' /tmp/bad-sqe.log
# A registration whose response cannot be written leaves no region (nothing pinned); 8 GiB over the
# locked-memory limit is refused before anything is sized for it.
reg-mr-abuse rsiw0 >/tmp/reg-mr-abuse.log 2>&1 || {
  cat /tmp/reg-mr-abuse.log; fail "reg-mr-abuse on rsiw0"; }
sed 's/^/reg-mr-abuse: /' /tmp/reg-mr-abuse.log
# Creating and destroying CQs, QPs and SRQs, 1000 more of each than the device's maximum: a
# destroyed object gives its place back. Then a kernel ULP still gets its CQs and QP on the
# device.
verbs-churn churn rsiw0 >/tmp/churn.log 2>&1 || { cat /tmp/churn.log; fail "verbs-churn churn on rsiw0"; }
sed 's/^/verbs-churn: /' /tmp/churn.log
[ "$RSIW_MODE" = test ] && { grep -q 'device max: cq 300, qp 300, srq 300' /tmp/churn.log ||
  fail "rsiw0 does not report the limits it was loaded with"; }
dmesg -c >/dev/null
modprobe rust_rdma_ping addr=$ADDR0 || fail "loading rust_rdma_ping on rsiw0 after the churn"
sleep 2
timeout 30 modprobe -r rust_rdma_ping || fail "unloading rust_rdma_ping"
dmesg | grep -q 'stopped, [1-9][0-9]* rounds' || { dmesg | grep rust_rdma_ping; fail "no ping rounds after the churn"; }
# A second thread rewrites the send ring's entries while the doorbell takes them: that QP may
# fail, nothing else does (the rping below runs on the same devices).
wait_port_free 7190 || fail "port 7190 in use"
timeout 120 verbs-churn sqe-race server $ADDR1 7190 >/tmp/sqe-race-server.log 2>&1 &
server=$!
wait_port 7190 $ADDR1 || { cat /tmp/sqe-race-server.log; fail "sqe-race server did not listen"; }
timeout 120 verbs-churn sqe-race client $ADDR1 7190 $ADDR0 >/tmp/sqe-race-client.log 2>&1 || {
  cat /tmp/sqe-race-client.log /tmp/sqe-race-server.log; fail "sqe-race client"; }
wait $server || { cat /tmp/sqe-race-server.log; fail "sqe-race server"; }
sed 's/^/sqe-race: /' /tmp/sqe-race-client.log /tmp/sqe-race-server.log
rping_pair "rsiw-rsiw" $ADDR1 $ADDR0
srq_pair "rsiw-rsiw" $ADDR1 $ADDR0
sges_pair "rsiw-rsiw" $ADDR1 $ADDR0
stale_pair "rsiw-rsiw" $ADDR1 $ADDR0
# The peer-to-peer model (RFC 6581): rsiw0 initiates with each RTR kind, rsiw1 accepts all.
[ "$(cat /sys/class/infiniband/rsiw1/rtr_kinds)" = "send,write,read" ] || fail "rtr_kinds default"
echo 1 >/sys/class/infiniband/rsiw0/peer_to_peer || fail "peer_to_peer 1"
for kind in send write read; do
  echo $kind >/sys/class/infiniband/rsiw0/rtr_kinds || fail "rtr_kinds $kind"
  rping_pair "rsiw-rsiw, peer-to-peer, $kind RTR" $ADDR1 $ADDR0
done
# No RTR kind in common: the initiator refuses the reply (and tells the peer with a
# TERMINATE), rping fails cleanly.
echo read >/sys/class/infiniband/rsiw1/rtr_kinds
echo write >/sys/class/infiniband/rsiw0/rtr_kinds
wait_port_free 7174 || fail "the previous rping's listener stayed"
timeout 30 rping -s -a $ADDR1 -C 1 >/tmp/rping-server.log 2>&1 &
server=$!
wait_port 7174 || fail "rping server did not listen"
if timeout 30 rping -c -a $ADDR1 -I $ADDR0 -C 1 >/tmp/rping-client.log 2>&1; then
  fail "peer-to-peer without a common RTR kind connected"
fi
# The server may already have ended on its own, seeing the connection fail (sh -e: kill's
# failure then must not end the script).
kill $server 2>/dev/null || true
wait $server 2>/dev/null || true
echo "rsiw-rsiw, peer-to-peer, no common RTR kind: refused"
echo 0 >/sys/class/infiniband/rsiw0/peer_to_peer
echo send,write,read >/sys/class/infiniband/rsiw0/rtr_kinds
echo send,write,read >/sys/class/infiniband/rsiw1/rtr_kinds
perf_all "rsiw-rsiw" rsiw1 rsiw0 $ADDR1
rdma link del rsiw1
left_behind "after rsiw with itself"

rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"
for crc in optional required; do
  echo $crc >/sys/class/infiniband/rsiw0/mpa_crc || fail "mpa_crc $crc"
  rping_pair "rsiw client, siw server, crc $crc" $ADDR1 $ADDR0
  rping_pair "siw client, rsiw server, crc $crc" $ADDR0 $ADDR1
  srq_pair "siw client, rsiw server, crc $crc" $ADDR0 $ADDR1
  perf_pair "rsiw client, siw server, crc $crc" siw1 rsiw0 $ADDR1 ib_write_bw -s 65536 -n $iters -F
  perf_pair "siw client, rsiw server, crc $crc" rsiw0 siw1 $ADDR0 ib_write_bw -s 65536 -n $iters -F
  perf_pair "rsiw client, siw server, crc $crc" siw1 rsiw0 $ADDR1 ib_read_bw -s 65536 -n $iters -F
  perf_pair "siw client, rsiw server, crc $crc" rsiw0 siw1 $ADDR0 ib_send_lat -s 8 -n $iters -F
  perf_pair "siw client, rsiw server, crc $crc" rsiw0 siw1 $ADDR0 ib_read_bw -s 65536 -n $iters -F
  perf_pair "rsiw client, siw server, crc $crc" siw1 rsiw0 $ADDR1 ib_send_lat -s 8 -n $iters -F
done
echo optional >/sys/class/infiniband/rsiw0/mpa_crc

# Large FPDUs (FPDUs spanning several TCP segments, rsiw's large_fpdus setting, on by default):
# loopback's 64 KiB segments never need them, so the path gets Ethernet's 1500-byte MTU. The C
# siw echoes the offer (Documentation/rsiw.rst), so rsiw sends it 4 KiB FPDUs over 1448-byte
# segments; rping verifies the data. Then rsiw with itself, both sides sending them.
ip link set lo mtu 1500 || fail "lo mtu 1500"
rping_pair "rsiw client, siw server, MTU 1500" $ADDR1 $ADDR0
rping_pair "siw client, rsiw server, MTU 1500" $ADDR0 $ADDR1
rdma link del siw1
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
rping_pair "rsiw-rsiw, MTU 1500" $ADDR1 $ADDR0
perf_pair "rsiw-rsiw, MTU 1500" rsiw1 rsiw0 $ADDR1 ib_write_bw -s 65536 -n $iters -F
rdma link del rsiw1
ip link set lo mtu 65536
rdma link del rsiw0
left_behind "at the end"
