# timeout: 240
# The image works with real tools: the C siw on two dummy netdevs, then rping and
# ib_write_bw -R (rdma_cm) across them, run to completion.
. /tests/lib.sh
two_dummies
modprobe siw
rdma link add siw0 type siw netdev dummy0
rdma link add siw1 type siw netdev dummy1
rdma link show
ibv_devices

count=10; [ "$RSIW_MODE" = test ] || count=1000
rping -s -a $ADDR1 -C $count -S 4096 >/tmp/rping-server.log 2>&1 &
sleep 1
start=$(date +%s)
rping -c -a $ADDR1 -I $ADDR0 -C $count -S 4096 -v >/tmp/rping-client.log 2>&1 || {
  cat /tmp/rping-client.log; fail "rping client failed"; }
wait $! || { cat /tmp/rping-server.log; fail "rping server failed"; }
n=$(grep -c 'ping data' /tmp/rping-client.log)
echo "rping: $n pings of 4096 bytes in $(( $(date +%s) - start ))s"
[ "$n" = "$count" ] || fail "rping: expected $count pings, saw $n"

iters=200; [ "$RSIW_MODE" = test ] || iters=5000
for size in 65536 1048576; do
  ib_write_bw -R -d siw1 -s $size -n $iters -F >/tmp/bw-server.log 2>&1 &
  sleep 1
  ib_write_bw -R -d siw0 -s $size -n $iters -F $ADDR1 >/tmp/bw-client.log 2>&1 || {
    cat /tmp/bw-client.log; fail "ib_write_bw client failed"; }
  wait $! || { cat /tmp/bw-server.log; fail "ib_write_bw server failed"; }
  line=$(awk -v s=$size '$1 == s {print}' /tmp/bw-client.log)
  [ -n "$line" ] || { cat /tmp/bw-client.log; fail "ib_write_bw printed no result line"; }
  echo "ib_write_bw siw $size B: $(echo "$line" | awk '{printf "%s iterations, BW average %s MB/s (%.2f Gb/s)", $2, $4, $4*8/1000}')"
done

rdma link del siw1
rdma link del siw0
