# timeout: 900
# tools/tcg-profile/profile.sh and critical-path.sh: one provider's ib_send_lat 8 B run, counted
# or traced by a QEMU plugin on the host (the trace starts at the `sync` before the client; the
# server waits by then).
# The provider and iterations come from the kernel command line (profile.provider=,
# profile.iters=); the guest's symbols go to /share for the host to attribute the counts.
. /tests/lib.sh
two_dummies
provider=$(sed -n 's/.*profile\.provider=\([a-z]*\).*/\1/p' /proc/cmdline)
iters=$(sed -n 's/.*profile\.iters=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$provider" ] && [ -n "$iters" ] || { echo "no profile.provider/profile.iters"; exit 1; }
modprobe "$provider"
rdma link add ${provider}0 type $provider netdev dummy0
rdma link add ${provider}1 type $provider netdev dummy1
timeout 600 ib_send_lat -R -d ${provider}1 -s 8 -n "$iters" -F >/tmp/s.log 2>&1 &
wait_port 18515 $ADDR1
# The symbols first: the timing plugin looks the driver's functions up in them at the `sync`.
cat /proc/kallsyms >/share/kallsyms
sync
timeout 600 ib_send_lat -R -d ${provider}0 -s 8 -n "$iters" -F $ADDR1 >/tmp/c.log 2>&1
wait
echo "PROFILE $provider $iters done"
rdma link del ${provider}1
rdma link del ${provider}0
