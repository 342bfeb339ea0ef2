# timeout: 900
# tools/tcg-profile/critical-path.sh's timed boot: ib_send_lat 8 B over rsiw and over the C siw
# in one boot, the providers taking turns, so that a host plugin's timings of both share the
# boot's pace (which under TCG moves every figure, shared TCP code too, by tens of percent between
# boots).
# Each provider keeps its own pair of devices (provider_pairs, as in kunit/bench/10-*); the guest's
# symbols go to /share before the `sync` that starts the host's recording. Iterations per run
# from the kernel command line (profile.iters=), rounds from profile.rounds= (default 4).
. /tests/lib.sh
iters=$(sed -n 's/.*profile\.iters=\([0-9]*\).*/\1/p' /proc/cmdline)
rounds=$(sed -n 's/.*profile\.rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$iters" ] || { echo "no profile.iters"; exit 1; }
echo 0 >/proc/sys/kernel/randomize_va_space
provider_pairs
cat /proc/kallsyms >/share/kallsyms
sync
failed=0
for round in $(seq "${rounds:-4}"); do
  case $((round % 2)) in 0) order="rsiw siw" ;; *) order="siw rsiw" ;; esac
  for provider in $order; do
    addr=$(server_of $provider)
    wait_port_free 18515 || exit 1
    timeout 300 ib_send_lat -R -d ${provider}1 -s 8 -n "$iters" -F >/tmp/s.log 2>&1 &
    wait_port 18515 $addr || exit 1
    # A refused client (see kunit/bench/10-*.sh) only costs this run its samples.
    timeout 300 ib_send_lat -R -d ${provider}0 -s 8 -n "$iters" -F $addr >/tmp/c.log 2>&1 ||
      failed=$((failed + 1))
    wait
    echo "PAIRED $provider $(awk '$1 == 8 {print "typical", $5, "p99", $8}' /tmp/c.log)"
  done
done
[ $failed -le 1 ] || { echo "PAIRED: $failed runs failed"; exit 1; }
echo "PROFILE paired $iters done"
for provider in rsiw siw; do
  rdma link del ${provider}1
  rdma link del ${provider}0
done
