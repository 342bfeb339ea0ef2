# timeout: 900
# NFSv4.1 sequential throughput (fio, 1 MiB direct I/O, 64 MiB file) over the kernel's C
# rpcrdma client and server on each provider (siw and rsiw, one device on dummy1),
# and over TCP for reference. Each figure is the median of five rounds, the providers taking
# turns and the first alternating, and each round's pair also gives a paired ratio (see
# bench_pair_ratio in lib.sh); prints "BENCH name unit provider value" lines.
. /tests/lib.sh
two_dummies

nfs_server_start
mkdir -p /mnt/nfs

# fio_run RW -> MB/s (terse v3: read bandwidth is field 7, write bandwidth field 48, KiB/s)
fio_run() {
  fio --name=seq --filename=/mnt/nfs/bench --rw=$1 --bs=1M --size=64M --direct=1 \
    --ioengine=sync --minimal >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; return 1; }
  awk -F';' -v rw=$1 '{kib = (rw == "read") ? $7 : $48; printf "%.1f", kib / 1024}' /tmp/fio.out
}

measure() { # provider mount-options
  timeout 60 mount -t nfs -o vers=4.1,$2 $ADDR1:/srv/export /mnt/nfs || {
    bench_record nfs_seq_write_1m MB/s $1 nan; bench_record nfs_seq_read_1m MB/s $1 nan; return; }
  bench_record nfs_seq_write_1m MB/s $1 "$(fio_run write || echo nan)"
  bench_record nfs_seq_read_1m MB/s $1 "$(fio_run read || echo nan)"
  rm -f /mnt/nfs/bench
  timeout 60 umount /mnt/nfs
}

measure_rdma() { # provider
  rdma link add ${1}1 type $1 netdev dummy1
  measure $1 proto=rdma,port=20049
  rdma link del ${1}1
}

modprobe siw
modprobe rsiw
bench_reset
for round in 1 2 3 4 5; do
  case $((round % 2)) in 0) order="rsiw siw" ;; *) order="siw rsiw" ;; esac
  for provider in $order; do measure_rdma $provider; done
  bench_pair_ratio nfs_seq_write_1m MB/s
  bench_pair_ratio nfs_seq_read_1m MB/s
  measure tcp proto=tcp
done
bench_report
nfs_server_stop
