# timeout: 240
# demo: perftest on rsiw and on the C siw, one table
# perftest over rdma_cm on each provider with devices of its own (provider_pairs: siw0 -> siw1,
# rsiw0 -> rsiw1; those of 01-rping-rsiw-siw if it ran): ib_write_bw and ib_read_bw with 100
# messages of 64 KiB, and ib_send_lat with 200 of 8 bytes. Every run must complete with a
# result line; the figures are perftest's, shown and not judged: this is the test kernel
# (KASAN, lockdep) under TCG emulation, not a benchmark (`make bench` is).
. /tests/lib.sh
[ -e /sys/class/infiniband/rsiw0 ] || provider_pairs

# perf PROVIDER PORT TOOL ARGS...: TOOL's server on PROVIDER1, its client on PROVIDER0, on
# rdma_cm port PORT (each run has one of its own: a listener goes some time after its process);
# the client's output in /tmp/perf-client.log.
perf() {
  local provider=$1 port=$2 tool=$3 addr src start
  shift 3
  addr=$(server_of $provider)
  src=$(addr_of ${provider}0) || fail "${provider}0 has no IPv4 address"
  timeout 60 $tool -R -d ${provider}1 -p $port "$@" >/tmp/perf-server.log 2>&1 &
  local server=$!
  wait_port $port $addr || { cat /tmp/perf-server.log; fail "$provider $tool: server did not listen"; }
  start=$(date +%s)
  timeout 60 $tool -R -d ${provider}0 -p $port --source_ip $src "$@" $addr >/tmp/perf-client.log 2>&1 || {
    cat /tmp/perf-client.log /tmp/perf-server.log; fail "$provider $tool $* failed"; }
  wait $server || { cat /tmp/perf-server.log; fail "$provider $tool: server failed"; }
  echo "$provider: $tool $* ($(( $(date +%s) - start ))s)"
}

# bw PROVIDER PORT TOOL: perftest's average bandwidth of 100 messages of 64 KiB, MB/s.
bw() {
  perf $1 $2 $3 -s 65536 -n 100 -F
  v=$(awk '$1 == 65536 && NF >= 4 { print $4 }' /tmp/perf-client.log)
  [ -n "$v" ] || { cat /tmp/perf-client.log; fail "$1 $3 printed no result line"; }
  echo "$v" >/tmp/fig.$3.$1
}
# lat PROVIDER PORT: ib_send_lat's typical and 99th percentile latency of 8-byte messages, us.
lat() {
  perf $1 $2 ib_send_lat -s 8 -n 200 -F
  v=$(awk '$1 == 8 && NF >= 8 { print $5, $8 }' /tmp/perf-client.log)
  [ -n "$v" ] || { cat /tmp/perf-client.log; fail "$1 ib_send_lat printed no result line"; }
  echo "$v" >/tmp/fig.ib_send_lat.$1
}

bw rsiw 18515 ib_write_bw
bw siw 18516 ib_write_bw
bw rsiw 18517 ib_read_bw
bw siw 18518 ib_read_bw
lat rsiw 18519
lat siw 18520
fig() { cat /tmp/fig.$1.$2; }
printf '%-30s %10s %10s\n' "perftest over rdma_cm" "rsiw" "C siw"
printf '%-30s %10s %10s\n' "ib_write_bw 64 KiB, MB/s" "$(fig ib_write_bw rsiw)" "$(fig ib_write_bw siw)"
printf '%-30s %10s %10s\n' "ib_read_bw 64 KiB, MB/s" "$(fig ib_read_bw rsiw)" "$(fig ib_read_bw siw)"
set -- $(fig ib_send_lat rsiw) $(fig ib_send_lat siw)
printf '%-30s %10s %10s\n' "ib_send_lat 8 B typical, us" "$1" "$3"
printf '%-30s %10s %10s\n' "ib_send_lat 8 B 99%, us" "$2" "$4"
for provider in rsiw siw; do
  rdma link del ${provider}1
  rdma link del ${provider}0
done
left_behind "after perftest"
