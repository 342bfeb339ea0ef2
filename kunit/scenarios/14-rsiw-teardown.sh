# timeout: 600
# rsiw torn down with work in flight, under the test kernel's KASAN, kmemleak and lockdep:
# rsiw0 (198.18.0.1, dummy0) against the C siw's siw1 (198.18.0.2, dummy1).
# (a) 120 rdma_cm connections from user space set up, used for one verified Send and torn down,
#     with rsiw0 as the server, then 120 with rsiw0 as the client (cm-cycles). Against the C
#     siw as the server the server speaks first and closes first (cm-cycles -g, which says why).
# (b) 20 plain TCP peers trickle MPA Requests to a listener on rsiw0 a byte at a time, never
#     completing them (mpa-trickle): the exchanges end at the device's deadline (mpa_timeout_ms,
#     2 s here); then, with no deadline near, `rdma link del` closes them at once, and the
#     listener hears of the removal and ends.
# (c) `rdma link del` during an ib_write_bw run over rdma_cm, rsiw0 the server, siw1 the client.
# (d) `modprobe -r rsiw` during an rping between rsiw0 and siw1; then with the kernel's NVMe/RDMA
#     host connected over rsiw0 to an nvmet-rdma target on siw1: the controller goes with the
#     device, and nvme disconnect-all completes.
# Each removal completes within 20 s (30 s with the NVMe/RDMA host), the processes on the device
# end (perftest, which busy-polls its CQ, when killed), rsiw0 comes back and carries an
# rping -V, and nothing is left behind.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
modprobe siw || fail "modprobe siw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
rdma link add siw1 type siw netdev dummy1 || fail "rdma link add siw1"

# Connections per direction in (a).
cycles=120

# running PID: the process exists and has not ended (a zombie has ended).
running() {
  local s
  s=$(sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f1)
  [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

# ends_within PID SECS: the process ends within SECS seconds.
ends_within() {
  for _ in $(seq $(( $2 * 5 ))); do
    running $1 || return 0
    sleep 0.2
  done
  ! running $1
}

# show_stuck PID NAME: where a process that did not end is.
show_stuck() {
  echo "$2 (pid $1) still runs: state $(sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f1)," \
    "wchan $(cat /proc/$1/wchan 2>/dev/null)"
  cat /proc/$1/stack 2>/dev/null || true
}

# wait_rts DEV: until a QP of DEV is connected (RTS), at most ~30 s.
wait_rts() {
  for _ in $(seq 150); do
    rdma resource show qp 2>/dev/null | grep "$1/" | grep -q 'state RTS' && return 0
    sleep 0.2
  done
  return 1
}

# rping_pair NAME SERVER_ADDR CLIENT_ADDR: rping -V, 20 rounds of 4 KiB, data verified.
rping_pair() {
  wait_port_free 7174 || fail "$1: the previous rping's listener stayed"
  timeout 60 rping -s -a $2 -C 20 -S 4096 -V >/tmp/rping-server.log 2>&1 &
  local server=$!
  wait_port 7174 $2 || fail "$1: rping server did not listen"
  timeout 60 rping -c -a $2 -I $3 -C 20 -S 4096 -V -v >/tmp/rping-client.log 2>&1 || {
    cat /tmp/rping-client.log /tmp/rping-server.log; fail "$1: rping client failed"; }
  wait $server || { cat /tmp/rping-server.log; fail "$1: rping server failed"; }
  n=$(grep -c 'ping data' /tmp/rping-client.log || true)
  [ "$n" = 20 ] || fail "$1: rping: expected 20 pings, saw $n"
  echo "$1: rping $n rounds of 4096 bytes, verified"
}

# readd NAME: rsiw0 again (loading rsiw if it went), and an rping through it.
readd() {
  grep -q '^rsiw ' /proc/modules || modprobe rsiw || fail "$1: modprobe rsiw"
  rdma link add rsiw0 type rsiw netdev dummy0 || fail "$1: rdma link add rsiw0 again"
  rping_pair "$1: rsiw server, siw client" $ADDR0 $ADDR1
}

# --- (a) connect/disconnect cycles ---
# cycles_run NAME SERVER_ADDR CLIENT_ADDR [-g]
cycles_run() {
  wait_port_free 7480 || fail "$1: the previous listener stayed"
  timeout 500 cm-cycles $4 server $2 7480 $cycles >/tmp/cm-cycles-server.log 2>&1 &
  local server=$!
  wait_port 7480 $2 || { cat /tmp/cm-cycles-server.log; fail "$1: cm-cycles server did not listen"; }
  timeout 500 cm-cycles $4 client $2 7480 $cycles $3 >/tmp/cm-cycles-client.log 2>&1 || {
    cat /tmp/cm-cycles-client.log /tmp/cm-cycles-server.log; dmesg | tail -30
    fail "$1: cm-cycles client failed"; }
  wait $server || { cat /tmp/cm-cycles-server.log; fail "$1: cm-cycles server failed"; }
  echo "$1: $(tail -n 1 /tmp/cm-cycles-client.log)"
}
cycles_run "rsiw server, siw client" $ADDR0 $ADDR1
cycles_run "siw server, rsiw client" $ADDR1 $ADDR0 -g
left_behind "after the connect/disconnect cycles"

# --- (b) trickled MPA exchanges: the deadline, then rdma link del ---
wait_port_free 7481 || fail "port 7481 in use"
# A listener that waits up to 60 s for a connection request (none comes: no exchange completes).
timeout 90 cm-cycles server $ADDR0 7481 1 >/tmp/listener.log 2>&1 &
listener=$!
wait_port 7481 $ADDR0 || { cat /tmp/listener.log; fail "the listener on rsiw0 did not listen"; }
# A byte every 500 ms, 19 of them: the bytes keep coming for 9 s, past the 2 s deadline.
echo 2000 >/sys/class/infiniband/rsiw0/mpa_timeout_ms || fail "mpa_timeout_ms 2000"
timeout 60 mpa-trickle $ADDR0 7481 20 500 30 >/tmp/trickle.log 2>&1 || {
  cat /tmp/trickle.log; fail "trickled MPA exchanges were not all closed by rsiw0"; }
last=$(sed -n 's/.*the last after \([0-9.]*\) s.*/\1/p' /tmp/trickle.log)
awk -v t="$last" 'BEGIN { exit !(t != "" && t < 6) }' || {
  cat /tmp/trickle.log
  fail "trickled MPA exchanges outlived the 2 s deadline: the last closed after ${last}s"; }
echo "20 trickled MPA exchanges, deadline 2 s: the last closed after ${last}s"
# No deadline near now: only the removal can end these exchanges.
echo 60000 >/sys/class/infiniband/rsiw0/mpa_timeout_ms || fail "mpa_timeout_ms 60000"
timeout 120 mpa-trickle --hold $ADDR0 7481 20 500 90 >/tmp/trickle.log 2>&1 &
trickle=$!
for _ in $(seq 50); do grep -q 'connections open' /tmp/trickle.log && break; sleep 0.2; done
grep -q 'connections open' /tmp/trickle.log || {
  cat /tmp/trickle.log; fail "mpa-trickle did not connect"; }
sleep 2
n=$(grep -c 'closed by the peer after' /tmp/trickle.log || true)
[ "$n" = 0 ] || { cat /tmp/trickle.log; fail "$n trickled exchanges closed before the removal"; }
start=$(date +%s)
timeout 20 rdma link del rsiw0 || {
  cat /tmp/trickle.log; fail "rdma link del rsiw0 during trickled MPA exchanges"; }
echo "rdma link del during 20 trickled MPA exchanges: $(( $(date +%s) - start ))s"
for _ in $(seq 50); do
  [ "$(grep -c 'closed by the peer after' /tmp/trickle.log)" -ge 20 ] && break
  sleep 0.2
done
kill -TERM $trickle 2>/dev/null || true
wait $trickle || { cat /tmp/trickle.log; fail "mpa-trickle --hold"; }
n=$(grep -c 'closed by the peer after' /tmp/trickle.log || true)
[ "$n" = 20 ] || {
  cat /tmp/trickle.log; fail "within 10 s of rdma link del, $n of 20 trickled connections were closed"; }
echo "$(tail -n 1 /tmp/trickle.log)"
ends_within $listener 10 || {
  show_stuck $listener cm-cycles; fail "the listener on rsiw0 did not end after rdma link del"; }
wait $listener 2>/dev/null && rc=0 || rc=$?
grep -q 'got RDMA_CM_EVENT_DEVICE_REMOVAL' /tmp/listener.log || {
  cat /tmp/listener.log; fail "the listener on rsiw0 did not hear of the removal"; }
echo "the listener on rsiw0 heard of the removal and ended (status $rc)"
readd "after rdma link del during trickled MPA exchanges"

# --- (c) rdma link del under ib_write_bw ---
wait_port_free 18515 || fail "perftest's port in use"
timeout 120 ib_write_bw -R -d rsiw0 -s 65536 -D 20 -F >/tmp/perf-server.log 2>&1 &
server=$!
wait_port 18515 $ADDR0 || { cat /tmp/perf-server.log; fail "ib_write_bw server did not listen"; }
timeout 120 ib_write_bw -R -d siw1 --source_ip $ADDR1 -s 65536 -D 20 -F $ADDR0 >/tmp/perf-client.log 2>&1 &
client=$!
wait_rts rsiw0 || { cat /tmp/perf-client.log /tmp/perf-server.log; fail "ib_write_bw did not connect"; }
sleep 3
start=$(date +%s)
timeout 20 rdma link del rsiw0 || fail "rdma link del rsiw0 under ib_write_bw"
echo "rdma link del under ib_write_bw: $(( $(date +%s) - start ))s"
# perftest never reads a device's fatal event: a side busy-polling its CQ (the rings now read as
# zeros) runs on in user space. That one is killed and must go at once: a process the kernel
# holds would not.
for _ in $(seq 150); do
  running $server || running $client || break
  sleep 0.2
done
for side in server client; do
  eval pid=\$$side
  if running $pid; then
    show_stuck $pid "ib_write_bw $side"
    kill -KILL $pid 2>/dev/null || true
    ends_within $pid 5 || fail "ib_write_bw $side held in the kernel 30 s after rdma link del"
    echo "ib_write_bw $side: still polling 30 s after the removal, killed"
  fi
  wait $pid 2>/dev/null && rc=0 || rc=$?
  echo "ib_write_bw $side ended (status $rc)"
done
readd "after rdma link del under ib_write_bw"

# --- (d) module unload under an rping, then under an NVMe/RDMA host ---
wait_port_free 7174 || fail "the previous rping's listener stayed"
timeout 120 rping -s -a $ADDR0 -C 100000 -S 4096 -V >/tmp/rping-server.log 2>&1 &
server=$!
wait_port 7174 $ADDR0 || fail "rping server did not listen"
timeout 120 rping -c -a $ADDR0 -I $ADDR1 -C 100000 -S 4096 -V >/tmp/rping-client.log 2>&1 &
client=$!
wait_rts rsiw0 || { cat /tmp/rping-client.log /tmp/rping-server.log; fail "rping did not connect"; }
sleep 3
start=$(date +%s)
timeout 20 modprobe -r rsiw || fail "modprobe -r rsiw under an rping"
echo "rsiw unloaded under an rping: $(( $(date +%s) - start ))s"
grep -q '^rsiw ' /proc/modules && fail "rsiw still loaded"
for side in server client; do
  eval pid=\$$side
  ends_within $pid 20 || { show_stuck $pid "rping $side"; fail "rping $side did not end after the unload"; }
  wait $pid 2>/dev/null && rc=0 || rc=$?
  echo "rping $side (on $([ $side = server ] && echo rsiw0 || echo siw1)) ended (status $rc)"
done
readd "after unloading rsiw under an rping"

# nvme_unload: the nvme-rdma host on rsiw0, connected to an nvmet-rdma target on siw1
# (memory-backed null_blk); rsiw unloads with the controller up.
nvme_unload() {
  local nqn=nqn.2026-11.org.rsiw:teardown dev
  nvmet_up $ADDR1 $nqn
  # The host's source address, so that its queues are on rsiw0.
  dev=$(nvme_host_connect $ADDR1 $nqn $ADDR0) || fail "NVMe/RDMA host on rsiw0"
  rdma resource show qp 2>/dev/null | grep -q 'rsiw0/' || fail "the NVMe/RDMA host has no QP on rsiw0"
  timeout 60 dd if=$dev of=/dev/null bs=1M count=4 iflag=direct 2>/dev/null || fail "read over NVMe/RDMA from rsiw0"
  start=$(date +%s)
  timeout 30 modprobe -r rsiw || fail "modprobe -r rsiw with an NVMe/RDMA controller on rsiw0"
  echo "rsiw unloaded with an NVMe/RDMA controller connected: $(( $(date +%s) - start ))s"
  for _ in $(seq 50); do [ -e $dev ] || break; sleep 0.2; done
  [ -e $dev ] && fail "$dev still there after the unload"
  timeout 30 nvme disconnect-all || fail "nvme disconnect-all after the unload"
  nvmet_down $nqn
  echo "NVMe/RDMA: the host's controller went with rsiw0, the target on siw1 was taken down"
}
nvme_unload
readd "after unloading rsiw under an NVMe/RDMA host"

left_behind "at the end"
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
timeout 30 rdma link del siw1 || fail "rdma link del siw1"
echo "teardown: done"
