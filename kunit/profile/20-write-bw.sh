# timeout: 900
# `PROFILE_SCENARIO=20-write-bw tools/tcg-profile/profile.sh`: one provider's ib_write_bw 64 KiB
# run of profile.iters messages, counted by a QEMU plugin on the host; the guest's symbols go to
# /share.
. /tests/lib.sh
two_dummies
provider=$(sed -n 's/.*profile\.provider=\([a-z]*\).*/\1/p' /proc/cmdline)
iters=$(sed -n 's/.*profile\.iters=\([0-9]*\).*/\1/p' /proc/cmdline)
modprobe "$provider"
rdma link add ${provider}0 type $provider netdev dummy0
rdma link add ${provider}1 type $provider netdev dummy1
timeout 600 ib_write_bw -R -d ${provider}1 -s 65536 -n "$iters" -F >/tmp/s.log 2>&1 &
wait_port 18515 $ADDR1
timeout 600 ib_write_bw -R -d ${provider}0 -s 65536 -n "$iters" -F $ADDR1 >/tmp/c.log 2>&1
wait
echo "PROFILE $provider $iters done"
cat /proc/kallsyms >/share/kallsyms
