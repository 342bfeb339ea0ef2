# timeout: 600
# rpcrdma2's client transport against the stock C server on another host.
#   a: NFS client over rpcrdma2 (the C rpcrdma is never loaded)    b: NFS server (C nfsd, rdma 20049)
# Rounds of providers (a b): rsiw on both sides, then the C siw on both, then rsiw again with
# rpcrdma2 loaded with inline_threshold=1024, so that small operations use chunks too (a call
# or a largest reply of more than 768 bytes goes in a chunk: more calls have chunks than with
# the default 4096). Each round mounts NFSv3
# and NFSv4.0 with proto=rdma, writes a 300 KiB and a 4 MiB random file, a directory of 20
# entries and a symlink with a 3,000-byte target, remounts, reads everything back and compares,
# and lists a directory of 3,000 entries the server made (one create per entry over NFS would
# take minutes under emulation);
# checks the transport's mountstats line and that the chunks were used (Read chunks for the
# writes and the symlink, Write chunks for the reads, Reply chunks for the directory); then both
# sides delete their device and must have no RDMA resource left.
. /tests/lib.sh
. /pair/lib.sh
modprobe rsiw || fail "modprobe rsiw"
modprobe siw || fail "modprobe siw"
case $ROLE in
  a)
    # An earlier scenario's NFS client loaded the C rpcrdma: it goes first.
    modprobe -r rpcrdma 2>/dev/null || true
    ! grep -q '^rpcrdma ' /proc/modules || fail "the C rpcrdma cannot be unloaded"
    modprobe rpcrdma2 || fail "modprobe rpcrdma2"
    # lockd (NFSv3) registers with the local rpcbind.
    mkdir -p /run/rpcbind
    rpcbind -w 2>/dev/null || rpcbind
    dd if=/dev/urandom of=/tmp/small bs=1k count=300 2>/dev/null
    dd if=/dev/urandom of=/tmp/big bs=1M count=4 2>/dev/null
    target=$(printf 'a-long-symlink-target-%04d/' $(seq 115) | head -c 3000)
    ;;
esac

# check_tree DIR VERS: what the round wrote under DIR reads back the same.
check_tree() {
  timeout 120 cmp /tmp/small $1/small.$2 || fail "300 KiB read back over NFSv$2/rpcrdma2 differs"
  timeout 120 cmp /tmp/big $1/big.$2 || fail "4 MiB read back over NFSv$2/rpcrdma2 differs"
  n=$(timeout 60 ls $1/dir.$2 | wc -l)
  [ "$n" = 20 ] || fail "the directory lists $n entries over NFSv$2/rpcrdma2, not 20"
  # A glob reads the directory without a LOOKUP or GETATTR per entry (ls would, over NFSv4).
  n=$(timeout 60 sh -c 'set -- "$1"/listing/*; echo $#' - $1)
  [ "$n" = 3000 ] || fail "the server's directory lists $n entries over NFSv$2/rpcrdma2, not 3000"
  [ "$(readlink $1/link.$2)" = "$target" ] || fail "the long symlink reads back wrong over NFSv$2"
}

# xprt_line: the transport's mountstats line for /mnt/nfs.
xprt_line() {
  grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
}

# unload_rpcrdma2: transports go from a work item once their client let go of them.
unload_rpcrdma2() {
  for _ in $(seq 50); do modprobe -r rpcrdma2 2>/dev/null && break; sleep 0.2; done
  ! grep -q '^rpcrdma2 ' /proc/modules || fail "rpcrdma2 still in use after the mounts"
}

round=0
for providers in "rsiw rsiw 4096" "siw siw 4096" "rsiw rsiw 1024"; do
  round=$((round + 1))
  set -- $providers
  pa=$1 pb=$2 threshold=$3
  case $ROLE in a) dev=${1}0 ;; b) dev=${2}0 ;; esac
  if [ $ROLE = a ] && [ $threshold != 4096 ]; then
    unload_rpcrdma2
    modprobe rpcrdma2 inline_threshold=$threshold || fail "modprobe rpcrdma2 inline_threshold=$threshold"
    dmesg | grep -q "inline threshold $threshold bytes" || fail "rpcrdma2 did not take inline_threshold"
  fi
  timeout 30 rdma link add $dev type ${dev%0} netdev eth0 || fail "rdma link add $dev"
  case $ROLE in
    a)
      pair_sync serving-$round
      for vers in 3 4.0; do
        t0=$(date +%s)
        mkdir -p /mnt/nfs
        opts=vers=$vers,proto=rdma,port=20049
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "mount $opts over rpcrdma2 on $dev failed"
        grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
        grep -q '^rpcrdma2 [0-9]* [1-9]' /proc/modules || fail "the mount does not use rpcrdma2"
        timeout 120 cp /tmp/small /mnt/nfs/small.$vers || fail "300 KiB write over NFSv$vers/rpcrdma2"
        timeout 240 cp /tmp/big /mnt/nfs/big.$vers || fail "4 MiB write over NFSv$vers/rpcrdma2"
        mkdir /mnt/nfs/dir.$vers
        (cd /mnt/nfs/dir.$vers && for i in $(seq 20); do : >entry-with-a-longer-name-$i; done) ||
          fail "creating 20 files over NFSv$vers/rpcrdma2"
        ln -s "$target" /mnt/nfs/link.$vers || fail "a symlink with a 3000-byte target"
        # The transport's line: "xprt: rdma" and the C transport's 27 columns.
        line=$(xprt_line)
        echo "mountstats after writing: $line"
        set -- $line
        [ "$2" = rdma ] && [ $# = 29 ] || fail "mountstats transport line: $line"
        # Columns 13 and 16: Read chunks and the bytes they carried.
        [ "${13}" -gt 0 ] && [ "${16}" -ge $((4 << 20)) ] ||
          fail "the writes did not go as Read chunks: $line"
        # Calls with a Read or a Reply chunk: a lower inline threshold makes more of them.
        chunked=$((${13} + ${15}))
        if [ $threshold = 4096 ]; then
          eval "chunked_${vers%%.*}=$chunked"
        else
          eval "base=\$chunked_${vers%%.*}"
          [ "$chunked" -gt "$base" ] ||
            fail "with inline_threshold=$threshold, $chunked calls had chunks, as many as with 4096"
        fi
        timeout 60 umount /mnt/nfs || fail "umount"
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs || fail "remount $opts"
        check_tree /mnt/nfs $vers
        line=$(xprt_line)
        echo "mountstats after reading: $line"
        set -- $line
        # Columns 14, 15 and 17: Write chunks, Reply chunks, bytes the server wrote.
        [ "${14}" -gt 0 ] && [ "${17}" -ge $((4 << 20)) ] ||
          fail "the reads did not come as Write chunks: $line"
        [ "${15}" -gt 0 ] || fail "the directory listing used no Reply chunk: $line"
        rm -r /mnt/nfs/small.$vers /mnt/nfs/big.$vers /mnt/nfs/dir.$vers /mnt/nfs/link.$vers
        timeout 60 umount /mnt/nfs || fail "umount"
        echo "round $round ($pa/$pb, inline threshold $threshold): NFSv$vers over rpcrdma2 to the C server: 300 KiB, 4 MiB, 20 entries and a long symlink written, read back and compared; 3000 entries listed ($(( $(date +%s) - t0 )) s)"
      done
      pair_sync unmounted-$round
      ;;
    b)
      nfs_server_start
      mkdir -p /srv/export/listing
      (cd /srv/export/listing && for i in $(seq 3000); do : >entry-with-a-longer-name-$i; done)
      pair_sync serving-$round
      pair_sync unmounted-$round 500
      nfs_server_stop
      ;;
  esac
  timeout 30 rdma link del $dev || fail "rdma link del $dev"
  left_behind "after round $round ($pa/$pb)"
done
case $ROLE in
  a)
    killall rpcbind 2>/dev/null || true
    unload_rpcrdma2
    ;;
esac
