# timeout: 600
# rpcrdma2's client transport against the stock C server on another host.
#   a: NFS client over rpcrdma2 (the C rpcrdma is never loaded)    b: NFS server (C nfsd, rdma 20049)
# Rounds of providers (a b): rsiw on both sides, then the C siw on both. Each round mounts NFSv3
# and NFSv4.0 with proto=rdma, writes a 300 KiB and a 1 MiB random file, a directory of 200
# entries and a symlink, remounts, reads everything back and compares; checks the transport's
# mountstats line; then both sides delete their device and must have no RDMA resource left.
# rpcrdma2 sends everything inline (no chunks yet), so NFS reads and writes go 2 KiB at a time.
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
    dd if=/dev/urandom of=/tmp/big bs=1M count=1 2>/dev/null
    ;;
esac

# check_tree DIR VERS: what the round wrote under DIR reads back the same.
check_tree() {
  timeout 120 cmp /tmp/small $1/small.$2 || fail "300 KiB read back over NFSv$2/rpcrdma2 differs"
  timeout 120 cmp /tmp/big $1/big.$2 || fail "1 MiB read back over NFSv$2/rpcrdma2 differs"
  n=$(timeout 60 ls $1/dir.$2 | wc -l)
  [ "$n" = 200 ] || fail "the directory lists $n entries over NFSv$2/rpcrdma2, not 200"
  [ "$(readlink $1/link.$2)" = "small.$2" ] || fail "the symlink reads back wrong over NFSv$2"
}

round=0
for providers in "rsiw rsiw" "siw siw"; do
  round=$((round + 1))
  set -- $providers
  case $ROLE in a) dev=${1}0 ;; b) dev=${2}0 ;; esac
  timeout 30 rdma link add $dev type ${dev%0} netdev eth0 || fail "rdma link add $dev"
  case $ROLE in
    a)
      pair_sync serving-$round
      for vers in 3 4.0; do
        mkdir -p /mnt/nfs
        opts=vers=$vers,proto=rdma,port=20049
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "mount $opts over rpcrdma2 on $dev failed"
        grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
        grep -q '^rpcrdma2 [0-9]* [1-9]' /proc/modules || fail "the mount does not use rpcrdma2"
        timeout 120 cp /tmp/small /mnt/nfs/small.$vers || fail "300 KiB write over NFSv$vers/rpcrdma2"
        timeout 240 cp /tmp/big /mnt/nfs/big.$vers || fail "1 MiB write over NFSv$vers/rpcrdma2"
        mkdir /mnt/nfs/dir.$vers
        (cd /mnt/nfs/dir.$vers && for i in $(seq 200); do : >entry-with-a-longer-name-$i; done) ||
          fail "creating 200 files over NFSv$vers/rpcrdma2"
        ln -s small.$vers /mnt/nfs/link.$vers
        # The transport's line: "xprt: rdma" and the C transport's 27 columns.
        line=$(grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:')
        echo "mountstats: $line"
        set -- $line
        [ "$2" = rdma ] && [ $# = 29 ] || fail "mountstats transport line: $line"
        timeout 60 umount /mnt/nfs || fail "umount"
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs || fail "remount $opts"
        check_tree /mnt/nfs $vers
        rm -r /mnt/nfs/small.$vers /mnt/nfs/big.$vers /mnt/nfs/dir.$vers /mnt/nfs/link.$vers
        timeout 60 umount /mnt/nfs || fail "umount"
        echo "round $round ($providers): NFSv$vers over rpcrdma2 to the C server: 300 KiB, 1 MiB, 200 entries and a symlink written, read back and compared"
      done
      pair_sync unmounted-$round
      ;;
    b)
      nfs_server_start
      pair_sync serving-$round
      pair_sync unmounted-$round 500
      nfs_server_stop
      ;;
  esac
  timeout 30 rdma link del $dev || fail "rdma link del $dev"
  left_behind "after round $round ($providers)"
done
case $ROLE in
  a)
    killall rpcbind 2>/dev/null || true
    # Transports go from a work item once their client let go of them.
    for _ in $(seq 50); do modprobe -r rpcrdma2 2>/dev/null && break; sleep 0.2; done
    ! grep -q '^rpcrdma2 ' /proc/modules || fail "rpcrdma2 still in use after the mounts"
    ;;
esac
