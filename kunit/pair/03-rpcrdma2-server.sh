# timeout: 1800
# rpcrdma2's server transport on another host, mounted by the stock C client and by rpcrdma2's
# own client (in Version 2, the module's default).
#   a: NFS client (the C rpcrdma, or rpcrdma2)    b: NFS server: C nfsd over rpcrdma2, class
#                                                    "rdma" ident 256 (the C rpcrdma never loaded)
# Rounds (client, provider on both sides, server's inline threshold, NFS versions): the C
# client over rsiw, rpcrdma2's client over rsiw and the C client over the C siw, each mounting
# NFSv3, NFSv4.1 and NFSv4.2 (scenario 16 runs the C client against a server of
# inline_threshold=1024 in one guest). Each mount (proto=rdma) writes a page, a 300 KiB and a
# 4 MiB random file, a directory of 20 entries and a symlink with a 3,000-byte target,
# remounts, reads everything back and compares, and lists a directory of 3,000 entries b made; the client's mountstats
# show the chunks used (Read chunks for the writes, Write chunks for the reads, Reply chunks for
# the listing). A 32 MiB file goes both ways once per client: over NFSv4.2 from the C client,
# over NFSv3 from rpcrdma2's (scenario 16 moves 64 MiB over NFSv3 and NFSv4.1 in one guest).
# Then both sides delete their device and have no RDMA resource left; b stops nfsd and unloads
# rpcrdma2.
. /tests/lib.sh
. /pair/lib.sh
modprobe rsiw || fail "modprobe rsiw"
modprobe siw || fail "modprobe siw"
trap 'rc=$?; [ $rc = 0 ] || pair_cleanup' EXIT

case $ROLE in
  a)
    rpcbind_start
    dd if=/dev/urandom of=/tmp/page bs=4096 count=1 2>/dev/null
    dd if=/dev/urandom of=/tmp/small bs=1k count=300 2>/dev/null
    dd if=/dev/urandom of=/tmp/big bs=1M count=4 2>/dev/null
    dd if=/dev/urandom of=/tmp/huge bs=1M count=32 2>/dev/null
    target=$(printf 'a-long-symlink-target-%04d/' $(seq 115) | head -c 3000)
    ;;
  b)
    # An earlier scenario's NFS server loaded the C rpcrdma: it goes first.
    pair_unload rpcrdma
    ;;
esac

# check_tree DIR VERS: what the round wrote under DIR reads back the same.
check_tree() {
  timeout 120 cmp /tmp/page $1/page.$2 || fail "a page read back over NFSv$2 differs"
  timeout 120 cmp /tmp/small $1/small.$2 || fail "300 KiB read back over NFSv$2 differs"
  timeout 120 cmp /tmp/big $1/big.$2 || fail "4 MiB read back over NFSv$2 differs"
  n=$(timeout 60 ls $1/dir.$2 | wc -l)
  [ "$n" = 20 ] || fail "the directory lists $n entries over NFSv$2, not 20"
  # A glob reads the directory without a LOOKUP or GETATTR per entry (ls would, over NFSv4).
  n=$(timeout 60 sh -c 'set -- "$1"/listing/*; echo $#' - $1)
  [ "$n" = 3000 ] || fail "the server's directory lists $n entries over NFSv$2, not 3000"
  [ "$(readlink $1/link.$2)" = "$target" ] || fail "the long symlink reads back wrong over NFSv$2"
}

# xprt_line: the transport's mountstats line for /mnt/nfs.
xprt_line() {
  grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
}

round=0
for setup in "c rsiw 4096 3 4.1 4.2" "rpcrdma2 rsiw 4096 3 4.1 4.2" "c siw 4096 3 4.1 4.2"; do
  round=$((round + 1))
  set -- $setup
  kind=$1 prov=$2 threshold=$3
  shift 3
  versions=$*
  dev=${prov}0
  timeout 30 rdma link add $dev type $prov netdev eth0 || fail "rdma link add $dev"
  case $ROLE in
    a)
      use_client $kind
      pair_sync serving-$round
      for vers in $versions; do
        t0=$(date +%s)
        mkdir -p /mnt/nfs
        opts=vers=$vers,proto=rdma,port=20049
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "mount $opts ($kind client on $dev) failed"
        grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
        timeout 120 cp /tmp/page /mnt/nfs/page.$vers || fail "a page's write over NFSv$vers"
        timeout 120 cp /tmp/small /mnt/nfs/small.$vers || fail "300 KiB write over NFSv$vers"
        timeout 240 cp /tmp/big /mnt/nfs/big.$vers || fail "4 MiB write over NFSv$vers"
        huge=
        case "$kind/$prov/$threshold/$vers" in c/rsiw/4096/4.2 | rpcrdma2/rsiw/4096/3) huge=1 ;; esac
        if [ -n "$huge" ]; then
          t1=$(date +%s)
          timeout 300 cp /tmp/huge /mnt/nfs/huge.$vers || fail "32 MiB write over NFSv$vers"
          huge_write=$(( $(date +%s) - t1 ))
        fi
        mkdir /mnt/nfs/dir.$vers
        (cd /mnt/nfs/dir.$vers && for i in $(seq 20); do : >entry-with-a-longer-name-$i; done) ||
          fail "creating 20 files over NFSv$vers"
        ln -s "$target" /mnt/nfs/link.$vers || fail "a symlink with a 3000-byte target"
        line=$(xprt_line)
        echo "mountstats after writing: $line"
        set -- $line
        [ "$2" = rdma ] || fail "mountstats transport line: $line"
        # rpcrdma2's client and server speak Version 2 (column 30), the client's probe taken
        # (31: none refused), one RDMA2_CONNPROP each way (32, 33).
        [ $kind = c ] || { [ "${30}" = 2 ] && [ "${31}" = 0 ] && [ "${32}" = 1 ] && [ "${33}" = 1 ]; } ||
          fail "rpcrdma2's client and server did not speak Version 2: $line"
        # Column 13: Read chunks; 16: the bytes they carried (counted by rpcrdma2's client,
        # not by the C client's).
        [ "${13}" -gt 0 ] || fail "the writes did not go as Read chunks: $line"
        [ $kind = c ] || [ "${16}" -ge $((4 << 20)) ] || fail "too few bytes in Read chunks: $line"
        timeout 60 umount /mnt/nfs || fail "umount"
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs || fail "remount $opts"
        check_tree /mnt/nfs $vers
        if [ -n "$huge" ]; then
          # Read over the mount first (timed), then compared from the page cache.
          t1=$(date +%s)
          timeout 300 cat /mnt/nfs/huge.$vers >/dev/null || fail "32 MiB read over NFSv$vers"
          t2=$(date +%s)
          timeout 300 cmp /tmp/huge /mnt/nfs/huge.$vers || fail "32 MiB read back over NFSv$vers differs"
          rm /mnt/nfs/huge.$vers
          huge=", 32 MiB (written in $huge_write s, read in $((t2 - t1)) s, compared in $(( $(date +%s) - t2 )) s)"
        fi
        line=$(xprt_line)
        echo "mountstats after reading: $line"
        set -- $line
        # Columns 14, 15 and 17: Write chunks, Reply chunks, bytes the server wrote (counted
        # by rpcrdma2's client).
        [ "${14}" -gt 0 ] || fail "the reads did not come as Write chunks: $line"
        [ $kind = c ] || [ "${17}" -ge $((4 << 20)) ] || fail "too few bytes in Write chunks: $line"
        [ "${15}" -gt 0 ] || fail "the directory listing used no Reply chunk: $line"
        rm -r /mnt/nfs/page.$vers /mnt/nfs/small.$vers /mnt/nfs/big.$vers /mnt/nfs/dir.$vers /mnt/nfs/link.$vers
        timeout 60 umount /mnt/nfs || fail "umount"
        echo "round $round ($kind client, $prov, inline threshold $threshold): NFSv$vers to the rpcrdma2 server: a page, 300 KiB, 4 MiB$huge, 20 entries and a long symlink written, read back and compared; 3000 entries listed ($(( $(date +%s) - t0 )) s)"
      done
      pair_sync unmounted-$round 1500
      ;;
    b)
      pair_unload rpcrdma2
      modprobe rpcrdma2 inline_threshold=$threshold || fail "modprobe rpcrdma2 inline_threshold=$threshold"
      dmesg | grep -q 'rpcrdma2: server transport "rdma" registered' || fail "no server class \"rdma\""
      nfs_server_start
      grep -q '^rpcrdma ' /proc/modules && fail "the C rpcrdma loaded beside rpcrdma2"
      mkdir -p /srv/export/listing
      (cd /srv/export/listing && for i in $(seq 3000); do : >entry-with-a-longer-name-$i; done)
      pair_sync serving-$round
      pair_sync unmounted-$round 1500
      dmesg | grep 'rpcrdma2:' | grep -v 'accepted\|closing a connection: DISCONNECTED' | tail -n 5
      nfs_server_stop
      ;;
  esac
  timeout 30 rdma link del $dev || fail "rdma link del $dev"
  left_behind "after round $round ($kind client, $prov)"
done
case $ROLE in
  a) killall rpcbind 2>/dev/null || true; pair_unload rpcrdma; pair_unload rpcrdma2 ;;
  b) pair_unload rpcrdma2 ;;
esac
echo "rpcrdma2 server: the C client and rpcrdma2's client, NFSv3, 4.1 and 4.2, over rsiw and the C siw"
