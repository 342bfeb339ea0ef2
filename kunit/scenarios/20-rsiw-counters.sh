# timeout: 600
# What the standard tools show of rsiw: the port counters of `rdma statistic show link` (and
# the port's hw_counters in sysfs) move by what known transfers between rsiw0 and rsiw1 must
# make them move: rping -V (20 rounds of 4 KiB, each an RDMA Read and an RDMA Write), then
# ib_write_bw (200 Writes of 64 KiB). Between two devices of one kernel every FPDU one sends
# the other receives, so each side's sent counts equal the other's received ones. One MPA
# exchange per connection, by revision, with CRC, in the peer-to-peer model with its RTR, a
# refused request (MPA Reject) and a reply refused with a TERMINATE are counted where they
# happen; no CRC error anywhere. During a timed ib_write_bw, `rdma -dd resource show qp` shows
# each QP's detail: queue depths and use, MPA revision and CRC, IRD/ORD, peer-to-peer and RTR;
# `rdma -dd resource show mr` each MR's kind, validity, rights and range. Counters of chosen
# QPs (`rdma statistic qp`, auto mode): while a connection of qp-hold (20 Sends of 4 KiB) lives,
# each side's counter holds exactly its QP's counts, and the port's values moved by as much;
# `rdma -dd resource show cm_id` shows the MPA terms of both cm_ids. By hand: bind, unbind, and
# refusals of a missing QP, a second bind and a second unbind. rsiw's debug messages are dynamic
# debug call sites: listed in <debugfs>/dynamic_debug/control, switched on (module rsiw +p) for
# the two peer-to-peer connections they print each MPA exchange established, the QP state
# changes and the TERMINATE of the refused one, and nothing once switched off.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link del rsiw0 2>/dev/null || true
rdma link del rsiw1 2>/dev/null || true
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
sys=/sys/class/infiniband

# counter DEV NAME: the value `rdma statistic show link DEV/1` shows for NAME.
counter() {
  rdma statistic show link $1/1 | tr -s ' \n' '\n\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }' | grep .
}
# snapshot TAG: every counter of both devices into /tmp/TAG.DEV (name value per line).
snapshot() {
  for d in rsiw0 rsiw1; do
    rdma statistic show link $d/1 | tr -s ' \n' '\n\n' | awk 'NR > 2 { if (n == "") n = $0; else { print n, $0; n = "" } }' >/tmp/$1.$d
  done
}
# delta DEV NAME FROM TO: how much NAME of DEV moved between snapshots FROM and TO.
delta() {
  local a b
  a=$(awk -v n="$2" '$1 == n { print $2 }' /tmp/$3.$1)
  b=$(awk -v n="$2" '$1 == n { print $2 }' /tmp/$4.$1)
  [ -n "$a" ] && [ -n "$b" ] || { cat /tmp/$3.$1 /tmp/$4.$1; fail "$1 has no counter $2"; }
  echo $(( b - a ))
}
# expect_min DEV NAME FROM TO MIN / expect_eq DEV NAME FROM TO N: the delta is at least MIN /
# exactly N.
expect_min() {
  local d; d=$(delta $1 $2 $3 $4)
  [ "$d" -ge "$5" ] || fail "$1 $2 moved by $d ($3 -> $4), expected at least $5"
  echo "  $1 $2 +$d (>= $5)"
}
expect_eq() {
  local d; d=$(delta $1 $2 $3 $4)
  [ "$d" -eq "$5" ] || fail "$1 $2 moved by $d ($3 -> $4), expected $5"
  [ -n "${QUIET:-}" ] || echo "  $1 $2 +$d"
}
# conserved FROM TO: what each device sent between the snapshots, the other received.
conserved() {
  local from=$1 to=$2 s r
  for pair in "rsiw0 rsiw1" "rsiw1 rsiw0"; do
    set -- $pair
    for what in fpdus fpdu_bytes; do
      s=$(delta $1 ${what}_sent $from $to)
      r=$(delta $2 ${what}_received $from $to)
      [ "$s" -eq "$r" ] || fail "$1 sent $s $what, $2 received $r ($from -> $to)"
      echo "  $1 -> $2: $s $what sent and received"
    done
  done
}

rdma statistic show link rsiw0/1 || fail "rdma statistic show link rsiw0/1"
for name in fpdus_sent fpdu_bytes_sent fpdus_received fpdu_bytes_received crc_errors \
            terminate_sent_mpa terminate_received_ddp read_requests_sent read_responses_received \
            atomic_requests_sent mpa_established_rev2 mpa_rejects_sent rtrs_sent; do
  v=$(counter rsiw0 $name) || fail "rdma statistic: no counter $name"
  [ "$v" = 0 ] || fail "a new device's $name is $v"
  [ "$(cat $sys/rsiw0/ports/1/hw_counters/$name)" = 0 ] || fail "sysfs hw_counters/$name"
done
echo "rsiw0: every counter starts at 0 (rdma statistic and sysfs hw_counters)"

# rping_run NAME COUNT: rping -V between rsiw1 (server) and rsiw0 (client), COUNT rounds of
# 4 KiB; each round the server reads 4 KiB from the client and writes 4 KiB to it.
rping_run() {
  wait_port_free 7174 || fail "$1: the previous rping's listener stayed"
  timeout 60 rping -s -a $ADDR1 -C $2 -S 4096 -V >/tmp/rping-server.log 2>&1 &
  local server=$!
  wait_port 7174 $ADDR1 || fail "$1: rping server did not listen"
  timeout 60 rping -c -a $ADDR1 -I $ADDR0 -C $2 -S 4096 -V -v >/tmp/rping-client.log 2>&1 || {
    cat /tmp/rping-client.log /tmp/rping-server.log; fail "$1: rping client failed"; }
  wait $server || { cat /tmp/rping-server.log; fail "$1: rping server failed"; }
  n=$(grep -c 'ping data' /tmp/rping-client.log)
  [ "$n" = "$2" ] || fail "$1: rping: expected $2 pings, saw $n"
  echo "$1: rping $n rounds of 4096 bytes, verified"
}

# A client-server connection, no CRC: 20 Reads and 20 Writes of 4 KiB.
snapshot a
rping_run "rping" 20
snapshot b
rdma statistic show link rsiw0/1
rdma statistic show link rsiw1/1
conserved a b
expect_eq rsiw0 mpa_established_rev2 a b 1
expect_eq rsiw1 mpa_established_rev2 a b 1
for d in rsiw0 rsiw1; do
  for name in mpa_established_rev1 mpa_established_crc mpa_established_p2p mpa_failed \
              mpa_rejects_sent mpa_rejects_received crc_errors terminate_sent_rdmap \
              terminate_sent_ddp terminate_sent_mpa terminate_received_rdmap \
              terminate_received_ddp terminate_received_mpa; do
    QUIET=1 expect_eq $d $name a b 0
  done
done
QUIET=
echo "  one MPA exchange each side, revision 2, no CRC, no failure, no TERMINATE"
# The server (rsiw1) reads from the client and writes to it.
expect_eq rsiw1 read_requests_sent a b 20
expect_eq rsiw0 read_requests_received a b 20
expect_eq rsiw0 read_responses_sent a b 20
expect_eq rsiw1 read_responses_received a b 20
expect_eq rsiw0 read_requests_sent a b 0
for d in rsiw0 rsiw1; do
  expect_min $d fpdu_bytes_sent a b $((20 * 4096))
  expect_min $d fpdu_bytes_received a b $((20 * 4096))
done
# rsiw0 sends 2 Sends and a Read Response a round, rsiw1 a Read Request, 2 Sends and a Write.
expect_min rsiw0 fpdus_sent a b 60
expect_min rsiw1 fpdus_sent a b 80
[ "$(cat $sys/rsiw1/ports/1/hw_counters/read_requests_sent)" = \
  "$(counter rsiw1 read_requests_sent)" ] || fail "sysfs and rdma statistic differ"

# ib_write_bw over rdma_cm: 200 x 64 KiB from its client to its server. perftest's rdma_cm
# client may end up on the server's device whatever its source address, so the checks add up
# both devices: what was sent was received, and at least the Writes' bytes went.
wait_port_free 18515 || fail "the previous run's listener stayed"
timeout 120 ib_write_bw -R -d rsiw1 -s 65536 -n 200 -F >/tmp/perf-server.log 2>&1 &
server=$!
wait_port 18515 $ADDR1 || { cat /tmp/perf-server.log; fail "ib_write_bw server did not listen"; }
timeout 120 ib_write_bw -R -d rsiw0 --source_ip $ADDR0 -s 65536 -n 200 -F $ADDR1 \
  >/tmp/perf-client.log 2>&1 || {
  cat /tmp/perf-client.log /tmp/perf-server.log; fail "ib_write_bw failed"; }
wait $server || { cat /tmp/perf-server.log; fail "ib_write_bw server failed"; }
snapshot c
rdma statistic show link rsiw0/1
rdma statistic show link rsiw1/1
echo "ib_write_bw: 200 RDMA Writes of 65536 bytes"
for what in fpdus fpdu_bytes; do
  s=$(( $(delta rsiw0 ${what}_sent b c) + $(delta rsiw1 ${what}_sent b c) ))
  r=$(( $(delta rsiw0 ${what}_received b c) + $(delta rsiw1 ${what}_received b c) ))
  [ "$s" -eq "$r" ] || fail "ib_write_bw: $s $what sent, $r received"
  echo "  rsiw0 and rsiw1: $s $what sent and received"
done
s=$(( $(delta rsiw0 fpdu_bytes_sent b c) + $(delta rsiw1 fpdu_bytes_sent b c) ))
[ "$s" -ge $((200 * 65536)) ] || fail "ib_write_bw: $s bytes sent, expected at least $((200 * 65536))"
# An FPDU carries at most 64 KiB (MPA's length field).
s=$(( $(delta rsiw0 fpdus_sent b c) + $(delta rsiw1 fpdus_sent b c) ))
[ "$s" -ge 200 ] || fail "ib_write_bw: $s FPDUs sent, expected at least 200"
e=$(( $(delta rsiw0 mpa_established_rev2 b c) + $(delta rsiw1 mpa_established_rev2 b c) ))
# perftest may connect more than once; each connection is counted on both of its sides.
[ "$e" -ge 2 ] || fail "ib_write_bw: $e MPA exchanges counted"
echo "  $e MPA exchange sides counted"
expect_eq rsiw0 crc_errors b c 0
expect_eq rsiw1 crc_errors b c 0

# With MPA CRCs (rsiw0 asks for them): counted with the connection, and no CRC error.
echo required >$sys/rsiw0/mpa_crc || fail "mpa_crc required"
rping_run "rping, CRC" 5
snapshot d
conserved c d
for d in rsiw0 rsiw1; do
  expect_eq $d mpa_established_crc c d 1
  expect_eq $d crc_errors c d 0
done

# rping_refused WHAT: an rping from rsiw0 to a server on rsiw1 must not connect (WHAT says why).
rping_refused() {
  wait_port_free 7174 || fail "the previous rping's listener stayed"
  timeout 30 rping -s -a $ADDR1 -C 1 >/tmp/rping-server.log 2>&1 &
  server=$!
  wait_port 7174 $ADDR1 || fail "rping server did not listen"
  if timeout 30 rping -c -a $ADDR1 -I $ADDR0 -C 1 >/tmp/rping-client.log 2>&1; then
    fail "$1 connected"
  fi
  kill $server 2>/dev/null || true
  wait $server 2>/dev/null || true
}

# A request the responder refuses (rsiw1 never uses CRCs, rsiw0 insists): an MPA Reject.
echo disabled >$sys/rsiw1/mpa_crc || fail "mpa_crc disabled"
rping_refused "a CRC policy conflict"
snapshot e
expect_eq rsiw1 mpa_rejects_sent d e 1
expect_eq rsiw0 mpa_rejects_received d e 1
expect_eq rsiw0 mpa_established_rev2 d e 0
echo optional >$sys/rsiw0/mpa_crc
echo optional >$sys/rsiw1/mpa_crc

# rsiw's debug messages (pr_debug!) are dynamic debug call sites: listed in the control file,
# off until switched on there. They are on for the two peer-to-peer connections below.
ctl=/sys/kernel/debug/dynamic_debug/control
sites=$(grep -c '\[rsiw\]' $ctl)
[ "$sites" -ge 8 ] || fail "dynamic debug lists $sites call sites of rsiw"
grep '\[rsiw\]rsiw::qp ' $ctl | grep -qF 'QP {}: {:?} -> {:?}' ||
  fail "dynamic debug does not list rsiw's QP state change"
grep '\[rsiw\]' $ctl | grep -q ' =p' && fail "an rsiw debug message is on before it was switched on"
dmesg -c >/dev/null
echo 'module rsiw +p' >$ctl || fail "dynamic debug: module rsiw +p refused"
[ "$(grep '\[rsiw\]' $ctl | grep -c ' =p')" = "$sites" ] || fail "module rsiw +p did not switch every site on"

# The peer-to-peer model: rsiw0 initiates with a Write RTR, rsiw1 receives it.
echo 1 >$sys/rsiw0/peer_to_peer || fail "peer_to_peer 1"
echo write >$sys/rsiw0/rtr_kinds || fail "rtr_kinds write"
rping_run "rping, peer-to-peer" 5
snapshot f
expect_eq rsiw0 rtrs_sent e f 1
expect_eq rsiw1 rtrs_received e f 1
expect_eq rsiw0 mpa_established_p2p e f 1
expect_eq rsiw1 mpa_established_p2p e f 1
# No RTR kind in common: rsiw0 refuses the reply and tells rsiw1 with a TERMINATE (MPA layer).
echo read >$sys/rsiw1/rtr_kinds
rping_refused "peer-to-peer without a common RTR kind"
snapshot g
expect_eq rsiw0 terminate_sent_mpa f g 1
expect_eq rsiw0 mpa_failed f g 1
expect_eq rsiw0 rtrs_sent f g 0
echo 0 >$sys/rsiw0/peer_to_peer
echo send,write,read >$sys/rsiw0/rtr_kinds
echo send,write,read >$sys/rsiw1/rtr_kinds
# What the debug messages said of those two connections, and nothing once switched off.
echo 'module rsiw -p' >$ctl || fail "dynamic debug: module rsiw -p refused"
dmesg -c >/tmp/dyndbg.log
for want in 'rsiw: .*: MPA revision 2 established as initiator: CRC [a-z]*, IRD [0-9]* ORD [0-9]*, RTR' \
            'rsiw: .*: MPA revision 2 established as responder' 'rsiw: QP [0-9]*: Idle([0-9]*) -> Rts' \
            'rsiw: QP [0-9]*: .* -> Error' 'rsiw: .*: TERMINATE sent for a failed MPA exchange'; do
  grep -q "$want" /tmp/dyndbg.log || { grep 'rsiw: ' /tmp/dyndbg.log; fail "no debug message '$want'"; }
done
echo "dynamic debug: $sites rsiw call sites; switched on: $(grep -c 'rsiw: ' /tmp/dyndbg.log) messages for two connections, the second refused with a TERMINATE, of which:"
grep 'rsiw: ' /tmp/dyndbg.log | sed -n '1,12p' | sed 's/^/  /'
rping_run "rping, debug messages off" 1
dmesg | grep -q 'rsiw: .*established as\|rsiw: QP [0-9]*:' && fail "debug messages printed after module rsiw -p"

# The QPs' and MRs' detail while a connection runs (ib_write_bw for 6 seconds, client-server).
wait_port_free 18515 || fail "the previous run's listener stayed"
timeout 120 ib_write_bw -R -d rsiw1 -s 65536 -D 6 -F >/tmp/perf-server.log 2>&1 &
server=$!
wait_port 18515 $ADDR1 || { cat /tmp/perf-server.log; fail "ib_write_bw server did not listen"; }
timeout 120 ib_write_bw -R -d rsiw0 --source_ip $ADDR0 -s 65536 -D 6 -F $ADDR1 \
  >/tmp/perf-client.log 2>&1 &
client=$!
shown=
for _ in $(seq 40); do
  sleep 0.5
  rdma -dd resource show qp >/tmp/res-qp.log 2>&1 || true
  grep -q 'mpa_rev' /tmp/res-qp.log && { shown=1; break; }
done
rdma -dd resource show mr >/tmp/res-mr.log 2>&1 || true
wait $client || { cat /tmp/perf-client.log /tmp/perf-server.log; fail "timed ib_write_bw failed"; }
wait $server || { cat /tmp/perf-server.log; fail "timed ib_write_bw server failed"; }
cat /tmp/res-qp.log
[ -n "$shown" ] || fail "rdma -dd resource show qp: no rsiw detail of a connected QP"
for want in 'state RTS' 'sq_depth [1-9]' 'rq_depth [0-9]' 'mpa_rev 2' 'mpa_crc 0' \
            'ird [0-9]' 'ord [0-9]' 'p2p 0' 'rtr none' 'comm ib_write_bw'; do
  grep -q "$want" /tmp/res-qp.log || fail "rdma -dd resource show qp: no '$want'"
done
cat /tmp/res-mr.log
for want in 'kind user' 'valid 1' 'length [1-9]'; do
  grep -q "$want" /tmp/res-mr.log || fail "rdma -dd resource show mr: no '$want'"
done
echo "rdma resource show qp: state, queue depths, MPA revision and CRC, IRD/ORD, model and RTR"

# Counters of chosen QPs (`rdma statistic qp`) and the cm_ids' detail. qp_value FILE NAME: the
# value after NAME in the output of `rdma statistic qp show` saved in FILE.
qp_value() {
  tr -s ' \n' '\n\n' <$1 | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }' | grep . ||
    { cat $1; fail "rdma statistic qp show: no $2"; }
}
# hold_run TAG: qp-hold between rsiw0 (client) and rsiw1 (server): 20 Sends of 4096 bytes,
# then the connection stays until hold_end; the client's QP number in $hold_qpn.
hold_run() {
  rm -f /tmp/qp-hold.go
  wait_port_free 7300 || fail "$1: the previous qp-hold's listener stayed"
  qp-hold server $ADDR1 7300 >/tmp/qp-hold-server.log 2>&1 &
  hold_server=$!
  wait_port 7300 $ADDR1 || fail "$1: qp-hold server did not listen"
  qp-hold client $ADDR1 7300 $ADDR0 >/tmp/qp-hold-client.log 2>&1 &
  hold_client=$!
  for _ in $(seq 100); do
    grep -q '^received' /tmp/qp-hold-server.log && grep -q '^sent' /tmp/qp-hold-client.log && break
    sleep 0.2
  done
  grep -q '^received' /tmp/qp-hold-server.log && grep -q '^sent' /tmp/qp-hold-client.log || {
    cat /tmp/qp-hold-client.log /tmp/qp-hold-server.log; fail "$1: qp-hold's transfer"; }
  hold_qpn=$(sed -n 's/^sent .* qp \([0-9]*\)$/\1/p' /tmp/qp-hold-client.log)
  [ -n "$hold_qpn" ] || fail "$1: qp-hold client printed no QP number"
}
hold_end() {
  touch /tmp/qp-hold.go
  wait $hold_client || { cat /tmp/qp-hold-client.log; fail "$1: qp-hold client failed"; }
  wait $hold_server || { cat /tmp/qp-hold-server.log; fail "$1: qp-hold server failed"; }
}

# Auto mode: each user QP of the port is bound, when it moves to INIT, to the counter of its
# type (RC), made for the first. Each device has one QP of the connection, so its counter
# holds exactly that QP's counts: what the client sent the server received, at least the
# messages' bytes, no Read, one MPA exchange of revision 2 each.
rdma statistic qp set link rsiw0/1 auto type on || fail "rdma statistic qp set rsiw0 auto type on"
rdma statistic qp set link rsiw1/1 auto type on || fail "rdma statistic qp set rsiw1 auto type on"
snapshot h
hold_run "qp-hold, auto mode"
snapshot i
rdma statistic qp show link rsiw0/1 >/tmp/qpc0.log || fail "rdma statistic qp show link rsiw0/1"
rdma statistic qp show link rsiw1/1 >/tmp/qpc1.log || fail "rdma statistic qp show link rsiw1/1"
rdma -dd resource show cm_id >/tmp/res-cm.log 2>&1 || fail "rdma -dd resource show cm_id"
rdma statistic qp show >/tmp/stat-all.log 2>&1 || fail "rdma statistic qp show"
hold_end "qp-hold, auto mode"
snapshot j
cat /tmp/qpc0.log /tmp/qpc1.log
grep -q "cntn" /tmp/qpc0.log && grep -q "cntn" /tmp/qpc1.log || fail "no QP counter bound"
grep -qw "$hold_qpn" /tmp/qpc0.log || fail "rsiw0's QP counter does not list QP $hold_qpn"
c_sent=$(qp_value /tmp/qpc0.log fpdus_sent)
c_bytes=$(qp_value /tmp/qpc0.log fpdu_bytes_sent)
s_recv=$(qp_value /tmp/qpc1.log fpdus_received)
s_bytes=$(qp_value /tmp/qpc1.log fpdu_bytes_received)
echo "qp counters: client QP $hold_qpn sent $c_sent FPDUs ($c_bytes bytes), server QP received $s_recv ($s_bytes bytes)"
[ "$c_sent" -ge 20 ] || fail "client QP counter: $c_sent FPDUs sent, expected at least 20"
[ "$c_bytes" -ge $((20 * 4096)) ] || fail "client QP counter: $c_bytes bytes sent"
[ "$c_sent" -eq "$s_recv" ] && [ "$c_bytes" -eq "$s_bytes" ] ||
  fail "client QP counter sent $c_sent/$c_bytes, server QP counter received $s_recv/$s_bytes"
for n in fpdus_received fpdu_bytes_received read_requests_sent crc_errors mpa_failed; do
  v=$(qp_value /tmp/qpc0.log $n); [ "$v" = 0 ] || fail "client QP counter: $n $v, expected 0"
done
for n in fpdus_sent fpdu_bytes_sent read_requests_received terminate_sent_mpa; do
  v=$(qp_value /tmp/qpc1.log $n); [ "$v" = 0 ] || fail "server QP counter: $n $v, expected 0"
done
for f in /tmp/qpc0.log /tmp/qpc1.log; do
  v=$(qp_value $f mpa_established_rev2); [ "$v" = 1 ] || fail "$f: mpa_established_rev2 $v"
done
echo "  each QP counter: one MPA exchange of revision 2; the client's only sent, the server's only received"
# The port's values are the device's plus its QP counters': while the QPs live they moved by
# exactly what the counters hold, and the counts stay with the port after the QPs go.
expect_eq rsiw0 fpdus_sent h i $c_sent
expect_eq rsiw0 fpdu_bytes_sent h i $c_bytes
expect_eq rsiw1 fpdus_received h i $s_recv
expect_eq rsiw0 mpa_established_rev2 h i 1
expect_min rsiw0 fpdus_sent h j $c_sent
conserved h j
grep -q "link rsiw0/1 cntn" /tmp/stat-all.log && grep -q "link rsiw1/1 cntn" /tmp/stat-all.log ||
  { cat /tmp/stat-all.log; fail "rdma statistic qp show: not both devices' QP counters"; }
# The cm_ids of the connection show rsiw's MPA terms (the listener's has none).
cat /tmp/res-cm.log
for want in 'mpa_rev 2' 'mpa_crc 0' 'ird [0-9]' 'ord [0-9]' 'p2p 0' 'rtr none' 'comm qp-hold'; do
  grep -q "$want" /tmp/res-cm.log || fail "rdma -dd resource show cm_id: no '$want'"
done
[ "$(grep -c 'mpa_rev 2' /tmp/res-cm.log)" -ge 2 ] || fail "rdma resource show cm_id: not both sides' terms"
echo "rdma resource show cm_id: MPA revision and CRC, IRD/ORD, model and RTR of both sides"
rdma statistic qp show link rsiw0/1 | grep -q cntn && fail "a QP counter outlived its QPs"

# By hand: a QP is bound to a counter of its own and unbound; what makes no sense is refused.
rdma statistic qp set link rsiw0/1 auto off || fail "rdma statistic qp set auto off"
rdma statistic qp set link rsiw1/1 auto off || fail "rdma statistic qp set auto off"
hold_run "qp-hold, bound by hand"
rdma statistic qp bind link rsiw0/1 lqpn 999999 2>/dev/null && fail "bound a QP that does not exist"
rdma statistic qp bind link rsiw0/1 lqpn $hold_qpn || fail "rdma statistic qp bind lqpn $hold_qpn"
rdma statistic qp bind link rsiw0/1 lqpn $hold_qpn 2>/dev/null && fail "bound a bound QP again"
rdma statistic qp show link rsiw0/1 >/tmp/qpc0.log
cat /tmp/qpc0.log
cntn=$(qp_value /tmp/qpc0.log cntn)
v=$(qp_value /tmp/qpc0.log fpdus_sent)
[ "$v" = 0 ] || fail "a counter bound after the transfer counts $v FPDUs sent"
rdma statistic qp unbind link rsiw0/1 cntn $cntn lqpn $hold_qpn || fail "rdma statistic qp unbind"
rdma statistic qp unbind link rsiw0/1 cntn $cntn lqpn $hold_qpn 2>/dev/null && fail "unbound twice"
rdma statistic qp show link rsiw0/1 | grep -q cntn && fail "the counter outlived its unbinding"
hold_end "qp-hold, bound by hand"
echo "rdma statistic qp bind/unbind by hand: counter $cntn of QP $hold_qpn; a missing QP, a second bind and a second unbind refused"

rdma statistic show link rsiw0/1
rdma statistic show link rsiw1/1
rdma link del rsiw1
rdma link del rsiw0
