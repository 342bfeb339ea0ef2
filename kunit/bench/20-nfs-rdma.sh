# timeout: 900
# NFSv4.1 sequential throughput (fio, 1 MiB direct I/O, 64 MiB file) over the kernel's C
# rpcrdma client and server on each provider in turn (siw, then rsiw, one device on dummy1),
# and over TCP for reference. Prints "BENCH name unit provider value" lines.
. /tests/lib.sh
two_dummies

bench() { echo "BENCH $1 $2 $3 $4"; }

nfs_server_start
mkdir -p /mnt/nfs

# fio_run RW -> MB/s (terse v3: read bandwidth is field 7, write bandwidth field 48, KiB/s)
fio_run() {
  fio --name=seq --filename=/mnt/nfs/bench --rw=$1 --bs=1M --size=64M --direct=1 \
    --ioengine=sync --minimal >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; return 1; }
  awk -F';' -v rw=$1 '{kib = (rw == "read") ? $7 : $48; printf "%.1f", kib / 1024}' /tmp/fio.out
}

measure() { # provider mount-options
  timeout 60 mount -t nfs -o vers=4.1,$2 $ADDR1:/srv/export /mnt/nfs || { bench nfs_seq_write_1m MB/s $1 nan; bench nfs_seq_read_1m MB/s $1 nan; return; }
  w=$(fio_run write || echo nan)
  r=$(fio_run read || echo nan)
  bench nfs_seq_write_1m MB/s $1 "$w"
  bench nfs_seq_read_1m MB/s $1 "$r"
  rm -f /mnt/nfs/bench
  timeout 60 umount /mnt/nfs
}

modprobe siw
rdma link add siw1 type siw netdev dummy1
measure siw proto=rdma,port=20049
rdma link del siw1

modprobe rsiw
rdma link add rsiw1 type rsiw netdev dummy1
measure rsiw proto=rdma,port=20049
rdma link del rsiw1

measure tcp proto=tcp
nfs_server_stop
