# timeout: 1800
# NFSv4.2 over three transports, each client with its server, in one pair run (scripts/run-pair.sh
# DIR bench, from `make bench`): NFS over TCP (nfs_tcp), the kernel's C rpcrdma client and
# svcrdma speaking RPC-over-RDMA Version 1 (c_rpcrdma), and rpcrdma2's client and server
# speaking Version 2 (rpcrdma2_v2), both RDMA ones over rsiw.
#   a: NFS client: the C client over TCP; over RDMA the C rpcrdma, or rpcrdma2 version=2
#   b: NFS server: C nfsd on TCP 2049, "rdma 20049" (the C svcrdma) and "rdma2 20050"
#      (rpcrdma2, coexist=1)
# Each round runs the three in turn, the order rotating from round to round: a mounts NFSv4.2
# from b and runs fio on the mount: 1 MiB sequential write and then read of a 64 MiB file
# (direct I/O, sync engine), 4 KiB random reads of that file at queue depth 16 (libaio, direct
# I/O, 15 s), then creates 200 empty files in a new directory one after the other (files/s).
# Before its first figures, each transport is checked to be the one meant: /proc/mounts and,
# for rpcrdma2, version 2 in its mountstats line. Each figure is the median of the rounds, and
# each round gives two paired ratios, rpcrdma2_v2 over nfs_tcp and over c_rpcrdma
# (bench_pair_ratio). b serves until a is done.
. /tests/lib.sh
. /pair/lib.sh
ROUNDS=9
FILE=/mnt/nfs/bench
CREATES=200
FIGURES="nfs_xprt_seq_write_1m:MB/s nfs_xprt_seq_read_1m:MB/s nfs_xprt_randread_4k_qd16:IOPS nfs_xprt_create:files/s"

modprobe rsiw || fail "modprobe rsiw"
timeout 30 rdma link add rsiw0 type rsiw netdev eth0 || fail "rdma link add rsiw0"

now() { cut -d' ' -f1 /proc/uptime; }

# creates: CREATES empty files made one after the other in a new directory; files per second.
creates() {
  local dir=/mnt/nfs/creates t0 i
  mkdir $dir || return 1
  t0=$(now)
  i=0
  while [ $i -lt $CREATES ]; do : >$dir/f$i || return 1; i=$((i + 1)); done
  awk -v a="$t0" -v b="$(now)" -v n=$CREATES 'BEGIN { printf "%.1f\n", n / (b - a) }'
  rm -r $dir
}

# measure TRANSPORT: one round's figures over TRANSPORT.
measure() {
  local transport=$1 opts name
  case $transport in
    nfs_tcp) opts=proto=tcp ;;
    c_rpcrdma) use_client c; opts=proto=rdma,port=20049 ;;
    rpcrdma2_v2) use_client rpcrdma2 version=2; opts=proto=rdma,port=20050 ;;
  esac
  mkdir -p /mnt/nfs
  if ! timeout 60 mount -t nfs -o vers=4.2,$opts $PEER_ADDR:/srv/export /mnt/nfs; then
    echo "mount over $transport failed"
    for name in $FIGURES; do bench_record ${name%:*} ${name#*:} $transport nan; done
    return 0
  fi
  if [ $round = 1 ]; then
    echo "$transport: $(grep ' /mnt/nfs ' /proc/mounts)"
    if [ $transport = rpcrdma2_v2 ]; then
      line=$(grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:')
      echo "$transport: $line"
      set -- $line
      [ "${30}" = 2 ] || fail "rpcrdma2 does not speak Version 2 to the rpcrdma2 server: $line"
    fi
  fi
  bench_record nfs_xprt_seq_write_1m MB/s $transport \
    "$(fio_run seqwrite --rw=write --bs=1M --ioengine=sync && mbps 48 || echo nan)"
  bench_record nfs_xprt_seq_read_1m MB/s $transport \
    "$(fio_run seqread --rw=read --bs=1M --ioengine=sync && mbps 7 || echo nan)"
  bench_record nfs_xprt_randread_4k_qd16 IOPS $transport \
    "$(fio_run randread --rw=randread --bs=4k --ioengine=libaio --iodepth=16 --time_based \
         --runtime=15 && awk -F';' '{print $8}' /tmp/fio.out || echo nan)"
  rm -f $FILE
  bench_record nfs_xprt_create files/s $transport "$(creates || echo nan)"
  timeout 60 umount /mnt/nfs || fail "umount after the $transport round"
}

case $ROLE in
  a)
    nfs_client_start
    pair_sync serving 120 || fail "b did not start serving"
    bench_reset
    for round in $(seq $ROUNDS); do
      case $((round % 3)) in
        1) order="nfs_tcp c_rpcrdma rpcrdma2_v2" ;;
        2) order="c_rpcrdma rpcrdma2_v2 nfs_tcp" ;;
        0) order="rpcrdma2_v2 nfs_tcp c_rpcrdma" ;;
      esac
      for transport in $order; do measure $transport; done
      for name in $FIGURES; do
        bench_pair_ratio ${name%:*} ${name#*:} rpcrdma2_v2 nfs_tcp
        bench_pair_ratio ${name%:*} ${name#*:} rpcrdma2_v2 c_rpcrdma
      done
      echo "round $round ($order) done"
    done
    bench_report
    killall rpcbind 2>/dev/null || true
    pair_unload rpcrdma2
    pair_unload rpcrdma
    pair_sync done 60 || fail "b did not stay to the end"
    ;;
  b)
    nfs_server_start
    modprobe rpcrdma2 coexist=1 || fail "modprobe rpcrdma2 coexist=1"
    echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
    wait_port 20050 || fail "nothing listens on 20050"
    pair_sync serving 120 || fail "a did not come"
    pair_sync done 1740 || fail "a did not finish its rounds"
    nfs_server_stop
    pair_unload rpcrdma2
    ;;
esac
timeout 30 rdma link del rsiw0 || fail "rdma link del rsiw0"
