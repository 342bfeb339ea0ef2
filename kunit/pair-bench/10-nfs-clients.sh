# timeout: 900
# The rpcrdma2 NFS client against the kernel's C xprtrdma client, both mounting the same C
# server over rsiw, in one pair run (scripts/run-pair.sh DIR bench, from `make bench`).
#   a: NFS client, rpcrdma2 and the C rpcrdma in turn    b: NFS server (C nfsd and svcrdma)
# The two client transports cannot be loaded together (both register the transport "rdma"),
# and the C server lives in the C rpcrdma module: so the server is the other guest. Both sides
# use rsiw0 on eth0 for the whole run. Each round a mounts NFSv4.2 with proto=rdma over each
# client in turn (unloading the other), the first alternating from round to round, and runs
# fio on the mount: 1 MiB sequential write and then read of a 64 MiB file (direct I/O, sync
# engine: one request at a time) and 4 KiB random reads of that file at queue depth 16
# (libaio, direct I/O, 15 s). Each figure is the median of the rounds, and each round's pair
# gives a paired ratio, rpcrdma2 over the C client (bench_pair_ratio): the provider names in
# the BENCH lines are rpcrdma2 and c_rpcrdma. Nine rounds (about 40 s each) are the fewest
# whose median has a 95% confidence interval narrower than their whole range (bench-report.py).
# b serves until a is done.
. /tests/lib.sh
. /pair/lib.sh
ROUNDS=9
FILE=/mnt/nfs/bench

modprobe rsiw || fail "modprobe rsiw"
timeout 30 rdma link add rsiw0 type rsiw netdev eth0 || fail "rdma link add rsiw0"

# measure CLIENT: one round's three figures of CLIENT.
measure() {
  local client=$1 module=$1
  [ $client = c_rpcrdma ] && module=rpcrdma
  use_client $client
  mkdir -p /mnt/nfs
  if ! timeout 60 mount -t nfs -o vers=4.2,proto=rdma,port=20049 $PEER_ADDR:/srv/export /mnt/nfs; then
    echo "mount over $client failed"
    for name in nfs_client_seq_write_1m nfs_client_seq_read_1m; do bench_record $name MB/s $client nan; done
    bench_record nfs_client_randread_4k_qd16 IOPS $client nan
    return 0
  fi
  grep -q "^$module [0-9]* [1-9]" /proc/modules || fail "the mount does not use $module"
  [ $round = 1 ] && echo "$client: $(grep ' /mnt/nfs ' /proc/mounts)"
  bench_record nfs_client_seq_write_1m MB/s $client \
    "$(fio_run seqwrite --rw=write --bs=1M --ioengine=sync && mbps 48 || echo nan)"
  bench_record nfs_client_seq_read_1m MB/s $client \
    "$(fio_run seqread --rw=read --bs=1M --ioengine=sync && mbps 7 || echo nan)"
  bench_record nfs_client_randread_4k_qd16 IOPS $client \
    "$(fio_run randread --rw=randread --bs=4k --ioengine=libaio --iodepth=16 --time_based \
         --runtime=15 && awk -F';' '{print $8}' /tmp/fio.out || echo nan)"
  rm -f $FILE
  timeout 60 umount /mnt/nfs || fail "umount after the $client round"
}

case $ROLE in
  a)
    pair_sync serving 120 || fail "b did not start serving"
    bench_reset
    for round in $(seq $ROUNDS); do
      case $((round % 2)) in 1) order="c_rpcrdma rpcrdma2" ;; 0) order="rpcrdma2 c_rpcrdma" ;; esac
      for client in $order; do measure $client; done
      for name in nfs_client_seq_write_1m:MB/s nfs_client_seq_read_1m:MB/s nfs_client_randread_4k_qd16:IOPS; do
        bench_pair_ratio ${name%:*} ${name#*:} rpcrdma2 c_rpcrdma
      done
      echo "round $round ($order) done"
    done
    bench_report
    pair_unload rpcrdma2
    pair_unload rpcrdma
    pair_sync done 60 || fail "b did not stay to the end"
    ;;
  b)
    nfs_server_start
    pair_sync serving 120 || fail "a did not come"
    # a's rounds: at most the scenario's limit.
    pair_sync done 840 || fail "a did not finish its rounds"
    nfs_server_stop
    ;;
esac
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
