# timeout: 900
# `PROFILE_SCENARIO=30-nfs-randread tools/tcg-profile/profile.sh`: profile.iters random 4 KiB
# NFSv4.2 READs (fio, libaio at queue depth 16, O_DIRECT) from a server in the same kernel, over
# rsiw, counted by a QEMU plugin on the host. profile.provider= names the RPC-over-RDMA
# transport of both ends: `rpcrdma` (the C client and svcrdma, Version 1) or `rpcrdma2` (its
# client with version=2 and its server). The guest's symbols go to /share.
. /tests/lib.sh
two_dummies
provider=$(sed -n 's/.*profile\.provider=\([a-z0-9]*\).*/\1/p' /proc/cmdline)
iters=$(sed -n 's/.*profile\.iters=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$provider" ] && [ -n "$iters" ] || { echo "no profile.provider/profile.iters"; exit 1; }
case $provider in
  rpcrdma) ;;
  rpcrdma2) modprobe rpcrdma2 version=2 || fail "modprobe rpcrdma2 version=2" ;;
  *) fail "profile.provider must be rpcrdma or rpcrdma2, not $provider" ;;
esac
NFS_RDMA_MODULE=$provider
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start
wait_port 20049 || fail "nothing listens on 20049"
dd if=/dev/urandom of=/srv/export/f bs=1M count=64 2>/dev/null
mkdir -p /mnt/nfs
timeout 60 mount -t nfs -o vers=4.2,proto=rdma,port=20049 $ADDR1:/srv/export /mnt/nfs ||
  fail "mount over $provider"
grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
cat /proc/kallsyms >/share/kallsyms
timeout 600 fio --name=randread --filename=/mnt/nfs/f --size=64M --direct=1 --minimal \
  --rw=randread --bs=4k --ioengine=libaio --iodepth=16 --number_ios="$iters" \
  >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; fail "fio over $provider"; }
echo "PROFILE $provider $iters: $(awk -F';' '{print $6, "KiB read,", $8, "IOPS"}' /tmp/fio.out)"
grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
echo "PROFILE $provider $iters done"
