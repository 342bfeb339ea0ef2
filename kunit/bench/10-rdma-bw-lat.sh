# timeout: 1200
# RDMA throughput and latency between two devices on two dummy netdevs, over TCP loopback
# (the ceiling, measured with iperf3) and over each provider: the C siw (siw0 -> siw1) and
# rsiw (rsiw0 -> rsiw1), one after the other in the same boot, with the same perftest runs
# over rdma_cm. Prints one "BENCH name unit provider value" line per figure (the median of
# five rounds); the host collects them into bench-results.json. Kernel-ULP figures are in
# 20-nfs-rdma.sh.
. /tests/lib.sh
two_dummies
# Under TCG ib_send_lat has two modes, about 16 and 21 us here for either provider. Where
# user-space code lands is one thing that picks it: with address space randomisation on, each
# run draws its mode. Off, runs in a row keep theirs (5 runs each way: rsiw 18.3 to 19.3, siw
# 15.2 to 16.3; with it on, 18.1 to 22.7 and 15.2 to 21.2), though a boot can still move to the
# slow mode part-way, for both providers at once (which take turns within each round).
echo 0 >/proc/sys/kernel/randomize_va_space

bench() { echo "BENCH $1 $2 $3 $4"; }

# The ceiling: TCP between the two addresses.
iperf3 -s -B $ADDR1 -1 >/dev/null 2>&1 &
sleep 1
gbps=$(iperf3 -c $ADDR1 -B $ADDR0 -t 5 -f g 2>/dev/null | awk '/receiver/ {print $7}')
bench tcp_loopback_iperf3 Gb/s tcp "${gbps:-nan}"

modprobe siw
modprobe rsiw

# perftest over rdma_cm: server on ${provider}1, client on ${provider}0. Output: /tmp/c.log.
# Now and then (about one ib_send_lat run in ten here, with siw and rsiw alike) the client's
# connection is refused although the server listens, and perftest then crashes in librdmacm; such
# a pair is run once more.
perftest_pair() { # provider tool args...
  local provider=$1 tool=$2 try server; shift 2
  for try in 1 2; do
    wait_port_free 18515 || return 1
    timeout 120 $tool -R -d ${provider}1 "$@" >/tmp/s.log 2>&1 &
    server=$!
    wait_port 18515 $ADDR1 || return 1
    if timeout 120 $tool -R -d ${provider}0 "$@" $ADDR1 >/tmp/c.log 2>&1; then
      wait
      return 0
    fi
    cat /tmp/c.log >&2
    kill $server 2>/dev/null
    wait
    grep -q "Connection refused" /tmp/c.log || return 1
    echo "$provider $tool: connection refused, once more" >&2
  done
  return 1
}

run_bw() { # provider tool size -> MB/s average
  perftest_pair $1 $2 -s $3 -D 3 -F || return 1
  # Columns: bytes, iterations, BW peak (0 in duration mode), BW average [MiB/s], message
  # rate. Under TCG perftest's cycle counter sometimes makes the average 0 for a run that
  # went fine, so the bandwidth is taken from the iterations of the 3-second run instead
  # (which matches the average whenever that is sane).
  awk -v s=$3 '$1 == s {print $2 * s / 3 / 1048576}' /tmp/c.log
}
gbps() { awk '{printf "%.3f", $1*8/1000}'; }

# Each figure is the median of five rounds; the providers take turns within a round, and the
# round's first provider alternates, so that drift in the machine (TCG, the host's load) falls on
# both alike.
bench_reset
one_round() { # provider
  provider=$1
  rdma link add ${provider}0 type $provider netdev dummy0
  rdma link add ${provider}1 type $provider netdev dummy1
  for size in 4096 65536 1048576; do
    mbs=$(run_bw $provider ib_write_bw $size) || mbs=nan
    bench_record ib_write_bw_$size Gb/s $provider "$(echo "$mbs" | gbps)"
  done
  mbs=$(run_bw $provider ib_read_bw 65536) || mbs=nan
  bench_record ib_read_bw_65536 Gb/s $provider "$(echo "$mbs" | gbps)"

  perftest_pair $provider ib_send_lat -s 8 -n 5000 -F
  # Columns: bytes iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
  read -r typ p99 <<EOL
$(awk '$1 == 8 {print $5, $8}' /tmp/c.log)
EOL
  bench_record ib_send_lat_8_typical us $provider "${typ:-nan}"
  bench_record ib_send_lat_8_p99 us $provider "${p99:-nan}"
  rdma link del ${provider}1
  rdma link del ${provider}0
}

for round in 1 2 3 4 5; do
  case $((round % 2)) in 0) order="rsiw siw" ;; *) order="siw rsiw" ;; esac
  for provider in $order; do one_round $provider; done
done

bench_report
