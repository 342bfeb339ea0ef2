# timeout: 900
# The rpcrdma2 NFS server against the kernel's C svcrdma, both serving the same C nfsd to the C
# client over rsiw, in one pair run (scripts/run-pair.sh DIR bench, from `make bench`).
#   a: NFS client (the C rpcrdma)    b: NFS server: nfsd listening on "rdma 20049" (the C
#                                       svcrdma) and on "rdma2 20050" (rpcrdma2, coexist=1)
# Both servers live in one kernel: rpcrdma2 loads with coexist=1 beside the C module, so each
# round a mounts NFSv4.2 with proto=rdma from each server in turn (port 20049, then 20050, the
# first alternating from round to round), both sides on rsiw0 for the whole run, and runs fio
# on the mount: 1 MiB sequential write and then read of a 64 MiB file (direct I/O, sync engine)
# and 4 KiB random reads of that file at queue depth 16 (libaio, direct I/O, 15 s). Each
# figure is the median of the rounds, and each round's pair gives a paired ratio, rpcrdma2 over
# the C server (bench_pair_ratio): the provider names in the BENCH lines are rpcrdma2_server
# and c_svcrdma. Nine rounds, as the client row. b serves until a is done.
. /tests/lib.sh
. /pair/lib.sh
ROUNDS=9
FILE=/mnt/nfs/bench

modprobe rsiw || fail "modprobe rsiw"
timeout 30 rdma link add rsiw0 type rsiw netdev eth0 || fail "rdma link add rsiw0"

# measure SERVER: one round's three figures against SERVER.
measure() {
  local server=$1 port=20049
  [ $server = rpcrdma2_server ] && port=20050
  mkdir -p /mnt/nfs
  if ! timeout 60 mount -t nfs -o vers=4.2,proto=rdma,port=$port $PEER_ADDR:/srv/export /mnt/nfs; then
    echo "mount from $server failed"
    for name in nfs_server_seq_write_1m nfs_server_seq_read_1m; do bench_record $name MB/s $server nan; done
    bench_record nfs_server_randread_4k_qd16 IOPS $server nan
    return 0
  fi
  [ $round = 1 ] && echo "$server: $(grep ' /mnt/nfs ' /proc/mounts)"
  bench_record nfs_server_seq_write_1m MB/s $server \
    "$(fio_run seqwrite --rw=write --bs=1M --ioengine=sync && mbps 48 || echo nan)"
  bench_record nfs_server_seq_read_1m MB/s $server \
    "$(fio_run seqread --rw=read --bs=1M --ioengine=sync && mbps 7 || echo nan)"
  bench_record nfs_server_randread_4k_qd16 IOPS $server \
    "$(fio_run randread --rw=randread --bs=4k --ioengine=libaio --iodepth=16 --time_based \
         --runtime=15 && awk -F';' '{print $8}' /tmp/fio.out || echo nan)"
  rm -f $FILE
  timeout 60 umount /mnt/nfs || fail "umount after the $server round"
}

case $ROLE in
  a)
    nfs_client_start
    pair_sync serving 120 || fail "b did not start serving"
    bench_reset
    for round in $(seq $ROUNDS); do
      case $((round % 2)) in 1) order="c_svcrdma rpcrdma2_server" ;; 0) order="rpcrdma2_server c_svcrdma" ;; esac
      for server in $order; do measure $server; done
      for name in nfs_server_seq_write_1m:MB/s nfs_server_seq_read_1m:MB/s nfs_server_randread_4k_qd16:IOPS; do
        bench_pair_ratio ${name%:*} ${name#*:} rpcrdma2_server c_svcrdma
      done
      echo "round $round ($order) done"
    done
    bench_report
    nfs_client_stop
    pair_sync done 60 || fail "b did not stay to the end"
    ;;
  b)
    nfs_server_start
    modprobe rpcrdma2 coexist=1 || fail "modprobe rpcrdma2 coexist=1"
    echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
    wait_port 20050 || fail "nothing listens on 20050"
    pair_sync serving 120 || fail "a did not come"
    pair_sync done 840 || fail "a did not finish its rounds"
    nfs_server_stop
    for _ in $(seq 50); do modprobe -r rpcrdma2 2>/dev/null && break; sleep 0.2; done
    ;;
esac
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
