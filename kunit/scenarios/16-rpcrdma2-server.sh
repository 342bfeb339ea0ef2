# timeout: 420
# The rpcrdma2 server beside the C rpcrdma in one kernel: rpcrdma2 loads with coexist=1 (server
# class "rdma2" with an ident of its own, no client class), nfsd gets an "rdma2 20050" listener
# next to the C "rdma 20049" one, and the stock C client mounts it over rsiw with
# proto=rdma,port=20050. rsize=wsize=1024 keep every call and reply inline (the server answers
# chunks with ERR_CHUNK for now): small files written, listed, read back, NFSv3 and NFSv4.1.
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
nfs_server_start

modprobe rpcrdma2 coexist=1 || fail "rpcrdma2 coexist=1 does not load beside the C rpcrdma"
dmesg | grep -q 'rpcrdma2: server transport "rdma2" registered' || fail "no registration message"
dmesg | grep 'rpcrdma2:' | tail -n 2
echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener"
cat /proc/fs/nfsd/portlist
grep -q '^rdma2 20050' /proc/fs/nfsd/portlist || fail "no rdma2 listener in the portlist"
wait_port 20050 || fail "nothing listens on 20050"

mkdir -p /mnt/nfs
opts=proto=rdma,port=20050,rsize=1024,wsize=1024
for vers in 3 4.1; do
  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers $opts on the rpcrdma2 server failed"
  grep "/mnt/nfs nfs" /proc/mounts
  grep -q "/mnt/nfs nfs.*proto=rdma,port=20050" /proc/mounts || fail "not an RDMA mount on port 20050"
  echo "small file over NFSv$vers" >/mnt/nfs/small.$vers || fail "write over NFSv$vers"
  dd if=/dev/urandom of=/tmp/eight bs=1k count=8 2>/dev/null
  timeout 60 cp /tmp/eight /mnt/nfs/eight.$vers || fail "8 KiB write over NFSv$vers"
  timeout 60 ls -l /mnt/nfs || fail "ls over NFSv$vers"
  timeout 60 umount /mnt/nfs || fail "umount"
  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "remount vers=$vers"
  [ "$(timeout 60 cat /mnt/nfs/small.$vers)" = "small file over NFSv$vers" ] ||
    fail "small file read back over NFSv$vers differs"
  timeout 60 cmp /tmp/eight /mnt/nfs/eight.$vers || fail "8 KiB file read back over NFSv$vers differs"
  cmp /tmp/eight /srv/export/eight.$vers || fail "the server's copy of the 8 KiB file differs"
  echo "NFSv$vers, C client -> rpcrdma2 server: written, listed, read back and compared"
  timeout 60 umount /mnt/nfs || fail "umount"
done
dmesg | grep 'rpcrdma2:' | tail -n 6

# nfsd stopping closes our listener and connections; the module then unloads.
nfs_server_stop
for _ in $(seq 50); do
  modprobe -r rpcrdma2 2>/dev/null && break
  sleep 0.2
done
! grep -q '^rpcrdma2 ' /proc/modules || fail "rpcrdma2 still in use after nfsd stopped"
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
left_behind "after the rpcrdma2 server"
echo "rpcrdma2 server: NFSv3 and NFSv4.1 from the C client, inline, beside the C rpcrdma"
