# timeout: 900
# RDMA throughput and latency between two devices on two dummy netdevs, over TCP loopback
# (the ceiling, measured with iperf3) and over each provider. Prints one "BENCH name unit
# provider value" line per figure; the host collects them into bench-results.json.
# rsiw has no user-space data path yet (perftest needs it): its figures are reported as
# missing, not measured. Kernel-ULP figures for rsiw are in 20-nfs-rdma.sh.
. /tests/lib.sh
two_dummies

bench() { echo "BENCH $1 $2 $3 $4"; }

# The ceiling: TCP between the two addresses.
iperf3 -s -B $ADDR1 -1 >/dev/null 2>&1 &
sleep 1
gbps=$(iperf3 -c $ADDR1 -B $ADDR0 -t 5 -f g 2>/dev/null | awk '/receiver/ {print $7}')
bench tcp_loopback_iperf3 Gb/s tcp "${gbps:-nan}"

modprobe siw
rdma link add siw0 type siw netdev dummy0
rdma link add siw1 type siw netdev dummy1

# perftest over rdma_cm: server on siw1, client on siw0.
run_bw() { # tool size -> MB/s average
  $1 -R -d siw1 -s $2 -D 3 -F >/tmp/s.log 2>&1 &
  sleep 1
  $1 -R -d siw0 -s $2 -D 3 -F $ADDR1 >/tmp/c.log 2>&1 || { cat /tmp/c.log; return 1; }
  wait
  awk -v s=$2 '$1 == s {print $4}' /tmp/c.log
}
for size in 4096 65536 1048576; do
  mbs=$(run_bw ib_write_bw $size)
  bench ib_write_bw_$size Gb/s siw "$(echo "$mbs" | awk '{printf "%.3f", $1*8/1000}')"
  bench ib_write_bw_$size Gb/s rsiw missing
done
mbs=$(run_bw ib_read_bw 65536)
bench ib_read_bw_65536 Gb/s siw "$(echo "$mbs" | awk '{printf "%.3f", $1*8/1000}')"
bench ib_read_bw_65536 Gb/s rsiw missing

ib_send_lat -R -d siw1 -s 8 -n 5000 -F >/tmp/s.log 2>&1 &
sleep 1
ib_send_lat -R -d siw0 -s 8 -n 5000 -F $ADDR1 >/tmp/c.log 2>&1 || { cat /tmp/c.log; fail "ib_send_lat"; }
wait
# Columns: bytes iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
read -r typ p99 <<EOL
$(awk '$1 == 8 {print $5, $8}' /tmp/c.log)
EOL
bench ib_send_lat_8_typical us siw "${typ:-nan}"
bench ib_send_lat_8_p99 us siw "${p99:-nan}"
bench ib_send_lat_8_typical us rsiw missing
bench ib_send_lat_8_p99 us rsiw missing
rdma link del siw1
rdma link del siw0
