# timeout: 1500
# RDMA throughput and latency over TCP loopback: the ceiling (iperf3), then each provider with
# the same perftest runs over rdma_cm, the C siw (siw0 -> siw1 on dummy0/dummy1) and rsiw
# (rsiw0 -> rsiw1 on dummy2/dummy3), both in the same boot. Prints one "BENCH name unit
# provider value" line per figure (the median of its rounds); the host collects them into
# bench-results.json. Kernel-ULP figures are in 20-nfs-rdma.sh.
. /tests/lib.sh
two_dummies
# Under TCG ib_send_lat has modes (about 16 and 21 us on one host, for either provider). Where
# user-space code lands is one thing that picks it: with address space randomisation on, each
# run draws its mode. Off, runs in a row keep theirs (5 runs each way: rsiw 18.3 to 19.3, siw
# 15.2 to 16.3; with it on, 18.1 to 22.7 and 15.2 to 21.2), though a boot can still move to the
# slow mode part-way, for both providers at once.
echo 0 >/proc/sys/kernel/randomize_va_space

bench() { echo "BENCH $1 $2 $3 $4"; }

# The ceiling: TCP between the two addresses.
iperf3 -s -B $ADDR1 -1 >/dev/null 2>&1 &
sleep 1
gbps=$(iperf3 -c $ADDR1 -B $ADDR0 -t 5 -f g 2>/dev/null | awk '/receiver/ {print $7}')
bench tcp_loopback_iperf3 Gb/s tcp "${gbps:-nan}"

# Each provider keeps its two devices for the whole run, on dummies of its own.
provider_pairs

# perftest over rdma_cm: server on ${provider}1, client on ${provider}0. Output: /tmp/c.log.
# Now and then (about one ib_send_lat run in ten here, with siw and rsiw alike) the client's
# connection is refused although the server listens, and perftest then crashes in librdmacm; such
# a pair is run once more.
perftest_pair() { # provider tool args...
  local provider=$1 tool=$2 try server addr
  shift 2
  addr=$(server_of $provider)
  for try in 1 2; do
    wait_port_free 18515 || return 1
    timeout 120 $tool -R -d ${provider}1 "$@" >/tmp/s.log 2>&1 &
    server=$!
    wait_port 18515 $addr || return 1
    if timeout 120 $tool -R -d ${provider}0 "$@" $addr >/tmp/c.log 2>&1; then
      wait
      return 0
    fi
    cat /tmp/c.log >&2
    kill $server 2>/dev/null || true
    wait
    grep -q "Connection refused" /tmp/c.log || return 1
    echo "$provider $tool: connection refused, once more" >&2
  done
  return 1
}

# What the Write figures measure: this perftest (Debian's 4.5-0.17) asks for a completion of
# every 64 KiB and 1 MiB Write (rsiw counted none unsignalled in 3-second runs of each), but of
# only about one 4 KiB Write in a hundred. Like the C siw, rsiw copies a signalled request's
# payload on transmit, as its completion hands the buffer back while TCP may still have to
# resend from it; unsignalled ones of a page or more go by page reference. So at 64 KiB and
# 1 MiB both providers copy every byte twice (on transmit and when placing it) and differ only
# in what each does around the copies; at 4 KiB both send from the consumer's pages.
bw() { # tool size provider -> Gb/s
  perftest_pair $3 $1 -s $2 -D 3 -F || return 1
  # Columns: bytes, iterations, BW peak (0 in duration mode), BW average [MiB/s], message
  # rate. Under TCG perftest's cycle counter sometimes makes the average 0 for a run that
  # went fine, so the bandwidth is taken from the iterations of the 3-second run instead
  # (which matches the average whenever that is sane).
  awk -v s=$2 '$1 == s {printf "%.3f\n", $2 * s / 3 / 1048576 * 8 / 1000}' /tmp/c.log
}
lat() { # provider -> typical and 99th percentile, us
  perftest_pair $1 ib_send_lat -s 8 -n 5000 -F || return 1
  # Columns: bytes iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
  awk '$1 == 8 {print $5, $8}' /tmp/c.log
}

# Under TCG the machine's pace drifts within a boot (one provider's ib_send_lat moved between
# 56 and 121 us in one boot here), so the providers are measured back to back: each round runs
# one figure for both, the round's first provider alternating, and each figure is the median of
# its rounds. Every round's pair also gives a ratio (rsiw over siw for throughput, siw over rsiw
# for latency: above 1, rsiw did better), whose median is one more figure,
# "<name>_paired_ratio".
bench_reset
# figure "NAME..." UNIT ROUNDS COMMAND...: `COMMAND PROVIDER` prints a value per NAME.
figure() {
  local names=$1 unit=$2 rounds=$3 round provider order name k
  shift 3
  for round in $(seq "$rounds"); do
    case $((round % 2)) in 0) order="rsiw siw" ;; *) order="siw rsiw" ;; esac
    for provider in $order; do
      "$@" $provider >/tmp/value.$provider || : >/tmp/value.$provider
    done
    k=0
    for name in $names; do
      k=$((k + 1))
      for provider in siw rsiw; do
        bench_record $name $unit $provider "$(awk -v k=$k '{print $k}' /tmp/value.$provider | grep . || echo nan)"
      done
      bench_pair_ratio $name $unit
    done
  done
}
for size in 4096 65536 1048576; do
  figure ib_write_bw_$size Gb/s 7 bw ib_write_bw $size
done
figure ib_read_bw_65536 Gb/s 7 bw ib_read_bw 65536
# A latency run is short next to a 3-second throughput run: more rounds.
figure "ib_send_lat_8_typical ib_send_lat_8_p99" us 15 lat

for provider in rsiw siw; do
  rdma link del ${provider}1
  rdma link del ${provider}0
done
ip link del dummy2
ip link del dummy3
bench_report
