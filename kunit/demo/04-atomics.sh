# timeout: 120
# demo: RFC 7306 atomics on rsiw, counted by rdma statistic
# RFC 7306 atomics between two rsiw devices (the KUnit suite rsiw_atomics, as scenario 10 runs
# it: rsiw0 on dummy0 requests, rsiw1 on dummy1 responds, and the C siw2 on dummy2, which has
# no RFC 7306, must make an atomic fail cleanly): Fetch-and-Add from 4 QPs with 64 each in
# flight ends exact, a Compare-and-Swap lock loses no update, masked Fetch-and-Add and
# Compare-and-Swap give RFC 7306's results. rsiw's counters (`rdma statistic show link`) count
# the atomics: each request rsiw1 received it answered, and rsiw0 got each answer.
. /tests/lib.sh
two_dummies
dummy_up 2 $ADDR2
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw0 type rsiw netdev dummy0 || fail "rdma link add rsiw0"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
modprobe siw
rdma link add siw2 type siw netdev dummy2 || fail "rdma link add siw2"

# counter DEV NAME: the value `rdma statistic show link DEV/1` shows for NAME.
counter() {
  rdma statistic show link $1/1 | tr -s ' \n' '\n\n' | awk -v n="$2" 'p { print; exit } $0 == n { p = 1 }' | grep .
}
dmesg -c >/dev/null
modprobe rsiw_atomics_kunit || fail "loading the rsiw_atomics suite"
results=/sys/kernel/debug/kunit/rsiw_atomics/results
grep -q '^ok [0-9]* rsiw_atomics' $results || { cat $results; fail "the rsiw_atomics suite failed"; }
grep '^    ok' $results | sed 's/^ *ok [0-9]* /rsiw_atomics: passed: /'
sent=$(counter rsiw0 atomic_requests_sent) || fail "no counter atomic_requests_sent"
received=$(counter rsiw1 atomic_requests_received) || fail "no counter atomic_requests_received"
answered=$(counter rsiw1 atomic_responses_sent) || fail "no counter atomic_responses_sent"
back=$(counter rsiw0 atomic_responses_received) || fail "no counter atomic_responses_received"
rdma statistic show link rsiw0/1 | tr -s ' \n' '\n\n' | awk '/^atomic_/ { n = $0; getline; printf "rsiw0 %s %s\n", n, $0 }'
rdma statistic show link rsiw1/1 | tr -s ' \n' '\n\n' | awk '/^atomic_/ { n = $0; getline; printf "rsiw1 %s %s\n", n, $0 }'
# 256 Fetch-and-Adds from 4 QPs, 200 one at a time, 3 masked ones, and the lock's
# Compare-and-Swaps (at least 2 for each of its 32 increments).
[ "$received" -ge $((256 + 200 + 3 + 64)) ] || fail "rsiw1 received $received atomic requests"
[ "$answered" = "$received" ] && [ "$back" = "$received" ] ||
  fail "rsiw1 received $received atomic requests and answered $answered; rsiw0 got $back answers"
# rsiw0 sent those, and one to the C siw, which ends that connection.
[ "$sent" = $((received + 1)) ] || fail "rsiw0 sent $sent atomic requests, rsiw1 received $received"
echo "RFC 7306 atomics: rsiw0 sent $sent requests (1 to the C siw, refused), rsiw1 executed and answered $received, rsiw0 received $back responses"
dmesg | sed -n 's/.*BENCH atomic_fetch_add_rate_4qp ops\/s rsiw \([0-9]*\).*/Fetch-and-Add rate, 4 QPs with 64 each in flight: \1 per second/p'
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
rdma link del siw2
left_behind "after the atomics"
