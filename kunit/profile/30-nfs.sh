# timeout: 900
# `PROFILE_SCENARIO=30-nfs tools/tcg-profile/profile.sh`: profile.iters NFSv4.2 operations of
# one kind (profile.work) from a server in the same kernel, counted by a QEMU plugin on the host:
#   randread  4 KiB random READs (fio, libaio at queue depth 16, O_DIRECT), the default;
#   seqread   1 MiB sequential reads (fio, sync, O_DIRECT);
#   seqwrite  1 MiB sequential writes (fio, sync, O_DIRECT);
#   create    empty files created one after the other in a new directory.
# These are the rows of `make bench`'s pair bench 12. profile.provider= names the transport of
# both ends: `rpcrdma` (the C client and svcrdma, Version 1) or `rpcrdma2` (its client with
# version=2 and its server), both over rsiw, or `tcp` (NFS over TCP on the same dummy
# netdevs). The guest's symbols go to /share.
. /tests/lib.sh
two_dummies
arg() { sed -n "s/.*profile\.$1=\([a-z0-9]*\).*/\1/p" /proc/cmdline; }
provider=$(arg provider)
iters=$(arg iters)
work=$(arg work)
work=${work:-randread}
[ -n "$provider" ] && [ -n "$iters" ] || { echo "no profile.provider/profile.iters"; exit 1; }
case $provider in
  rpcrdma) NFS_RDMA_MODULE=rpcrdma; opts=proto=rdma,port=20049 ;;
  rpcrdma2)
    modprobe rpcrdma2 version=2 || fail "modprobe rpcrdma2 version=2"
    NFS_RDMA_MODULE=rpcrdma2; opts=proto=rdma,port=20049 ;;
  tcp) NFS_RDMA_MODULE=rpcrdma; opts=proto=tcp ;;   # nfsd's rdma listener stays unused
  *) fail "profile.provider must be rpcrdma, rpcrdma2 or tcp, not $provider" ;;
esac
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start
wait_port 20049 || fail "nothing listens on 20049"
mkdir -p /mnt/nfs
timeout 60 mount -t nfs -o vers=4.2,$opts $ADDR1:/srv/export /mnt/nfs || fail "mount over $provider"
xprt() { grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'; }
xprt
# fio_profile ARGS...: fio on a 64 MiB file with ARGS, for profile.iters I/Os.
fio_profile() {
  timeout 600 fio --name=$work --filename=/mnt/nfs/f --size=64M --direct=1 --minimal \
    --number_ios="$iters" "$@" >/tmp/fio.out 2>/tmp/fio.err || {
    cat /tmp/fio.err; fail "fio $work over $provider"; }
}
[ $work = create ] || dd if=/dev/urandom of=/srv/export/f bs=1M count=64 2>/dev/null
cat /proc/kallsyms >/share/kallsyms
case $work in
  randread) fio_profile --rw=randread --bs=4k --ioengine=libaio --iodepth=16 ;;
  seqread) fio_profile --rw=read --bs=1M --ioengine=sync ;;
  seqwrite) fio_profile --rw=write --bs=1M --ioengine=sync ;;
  create)
    mkdir /mnt/nfs/creates || fail "mkdir over $provider"
    i=0
    while [ $i -lt "$iters" ]; do : >/mnt/nfs/creates/f$i || fail "create f$i"; i=$((i + 1)); done ;;
  *) fail "profile.work must be randread, seqread, seqwrite or create, not $work" ;;
esac
[ $work = create ] && echo "PROFILE $provider $iters: $iters files created" ||
  echo "PROFILE $provider $iters: $(awk -F';' '{print $6 + $47, "KiB moved,", $8 + $49, "IOPS"}' /tmp/fio.out)"
xprt
echo "PROFILE $provider $iters done"
