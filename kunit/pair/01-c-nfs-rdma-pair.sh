# timeout: 1200
# NFS over RDMA between two hosts with nothing of a new transport: the kernel's C rpcrdma and
# svcrdma over real RDMA providers on the link.
#   a: NFS client (C rpcrdma)    b: NFS server (C nfsd, rdma 20049)
# One round of providers (a b): a on the C siw and b on rsiw (wire interop across hosts, rsiw as
# the side that issues the RDMA Reads and Writes: the server). rsiw on both sides runs in pair
# scenarios 02 and 03 (with rpcrdma2 on one side) and scenario 09 (in one guest), rsiw against
# the C siw both ways in scenarios 07, 12, 13 and 14 (in one guest). The round mounts
# NFSv4.1 and NFSv3 with proto=rdma, writes a 4 MiB random file, remounts, reads it back and
# compares, and says how long that took; then both sides delete their device and must have no
# RDMA resource left.
. /tests/lib.sh
. /pair/lib.sh
modprobe rsiw || fail "modprobe rsiw"
modprobe siw || fail "modprobe siw"
case $ROLE in
  a) nfs_client_start; dd if=/dev/urandom of=/tmp/big bs=1M count=4 2>/dev/null ;;
esac

round=0
for providers in "siw rsiw"; do
  round=$((round + 1))
  set -- $providers
  case $ROLE in a) dev=${1}0 ;; b) dev=${2}0 ;; esac
  timeout 30 rdma link add $dev type ${dev%0} netdev eth0 || fail "rdma link add $dev"
  case $ROLE in
    a)
      pair_sync serving-$round
      for vers in 4.1 3; do
        t0=$(date +%s)
        mkdir -p /mnt/nfs
        timeout 60 mount -t nfs -o vers=$vers,proto=rdma,port=20049 $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "mount vers=$vers proto=rdma over $dev ($providers) failed"
        grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
        timeout 120 cp /tmp/big /mnt/nfs/big.$vers || fail "4 MiB write over NFSv$vers/RDMA ($providers)"
        timeout 60 umount /mnt/nfs || fail "umount"
        timeout 60 mount -t nfs -o vers=$vers,proto=rdma,port=20049 $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "remount vers=$vers ($providers)"
        timeout 120 cmp /tmp/big /mnt/nfs/big.$vers ||
          fail "4 MiB read back over NFSv$vers/RDMA ($providers) differs"
        rm /mnt/nfs/big.$vers
        timeout 60 umount /mnt/nfs || fail "umount"
        echo "round $round, a on ${1}, b on ${2}: NFSv$vers over C rpcrdma, 4 MiB written, read back and compared ($(( $(date +%s) - t0 )) s)"
      done
      pair_sync unmounted-$round
      ;;
    b)
      nfs_server_start
      pair_sync serving-$round
      # The client's two mounts and their 4 MiB each way.
      pair_sync unmounted-$round 400
      nfs_server_stop
      ;;
  esac
  timeout 30 rdma link del $dev || fail "rdma link del $dev"
  left_behind "after round $round ($providers)"
done
[ -z "$(rdma link show)" ] || { rdma link show; fail "RDMA links left"; }
case $ROLE in a) nfs_client_stop ;; esac
