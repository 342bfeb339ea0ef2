# timeout: 2400
# The rpcrdma2 server beside the C rpcrdma in one kernel: rpcrdma2 loads with coexist=1 (server
# class "rdma2" with an ident of its own, no client class), nfsd gets an "rdma2 20050" listener
# next to the C "rdma 20049" one, and the stock C client mounts it over rsiw with
# proto=rdma,port=20050 and its default 1 MiB rsize/wsize, so that every chunk type is used:
# writes send their data in Read chunks, reads get theirs in Write chunks, a 3,000-entry
# directory listing and a 4,000-byte symlink come back in Reply chunks, and the symlink goes
# out in a Position Zero Read chunk. Files of 300 KiB, 4 MiB and (over NFSv3) 64 MiB are
# written, read back and compared over NFSv3, NFSv4.1 and NFSv4.2 (pair scenario 03 moves
# 64 MiB over NFSv4.2 and NFSv3 across the link), and again over
# NFSv3 and NFSv4.1 with inline thresholds of 1024 bytes (rpcrdma2 inline_threshold=1024,
# which the C client then uses too). The client's own counters
# (/proc/self/mountstats, "xprt: rdma") must show each chunk type used, and fewer regions
# invalidated by the client than chunks: the server's replies invalidate a call's only region
# (Send With Invalidate).
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
opts=proto=rdma,port=20050
dd if=/dev/urandom of=/tmp/f300k bs=1k count=300 2>/dev/null
dd if=/dev/urandom of=/tmp/f4m bs=1M count=4 2>/dev/null
dd if=/dev/urandom of=/tmp/f64m bs=1M count=64 2>/dev/null
target=$(head -c 4000 /dev/zero | tr '\0' 'x')
mkdir -p /srv/export/many
(cd /srv/export/many && seq 3000 | xargs touch) || fail "cannot make the directory to list"

# The client's read, write and reply chunk counts of the mount at /mnt/nfs and the regions it
# had to invalidate itself (LOCAL_INV, "local_inv_needed"), one per line.
chunk_counts() {
  awk '$1 == "device" { mine = ($5 == "/mnt/nfs") }
       mine && $1 == "xprt:" && $2 == "rdma" { print $13; print $14; print $15; print $27; exit }' \
    /proc/self/mountstats
}
count() { chunk_counts | sed -n "$1p"; }
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# NFSv4.1 and later have a backchannel over rpcrdma2 (its class of ident 0x7232 ored with
# XPRT_TRANSPORT_BC): nfsd's callback path is up, so its SEQUENCE replies do not ask the client
# to bind its connection again. bcts: nfsd's BIND_CONN_TO_SESSION count (proc4ops: the count of
# ops, then op 0 on; op 41 is awk field 43). bcts_check VERS LABEL BEFORE: a pass added fewer
# than 10 (without a backchannel, one per operation: thousands for the listing).
bcts() { awk '$1 == "proc4ops" { print $43 }' /proc/net/rpc/nfsd; }
bcts_check() {
  n=$(( $(bcts) - $3 ))
  echo "NFSv$1 ($2): nfsd counted $n BIND_CONN_TO_SESSION"
  [ "$n" -lt 10 ] || fail "NFSv$1 ($2): $n BIND_CONN_TO_SESSION: the callback path was down"
}
# recall VERS: the C client holds deleg.VERS open for reading (a read delegation, with nfsd's
# callback state UP) and the server writes it locally: nfsd recalls the delegation over the
# backchannel (CB_RECALL), the client returns it, and the write goes on in well under the lease
# break time (45 s without a returned delegation).
recall() {
  vers=$1
  echo 'created on the server' >/srv/export/deleg.$vers
  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers for the recall"
  exec 3</mnt/nfs/deleg.$vers || fail "open deleg.$vers over NFSv$vers"
  read -r first <&3 || fail "read deleg.$vers over NFSv$vers"
  [ "$first" = "created on the server" ] || fail "deleg.$vers reads back \"$first\""
  deleg_holder $vers deleg.$vers
  t=$(now)
  timeout 120 sh -c "echo 'changed on the server' >>/srv/export/deleg.$vers" ||
    fail "writing deleg.$vers on the server"
  t=$(since $t)
  echo "NFSv$vers: the local write of deleg.$vers waited $t s for the recalled delegation"
  awk -v t=$t 'BEGIN { exit !(t < 15) }' ||
    fail "NFSv$vers: the write waited $t s: the delegation was not returned on recall"
  exec 3<&-
  timeout 30 grep -q "changed on the server" /mnt/nfs/deleg.$vers ||
    fail "the server's change of deleg.$vers not seen over NFSv$vers"
  for _ in $(seq 40); do timeout 60 umount /mnt/nfs 2>/dev/null && break; sleep 0.5; done
  ! grep -q ' /mnt/nfs ' /proc/mounts || fail "umount after the recall over NFSv$vers"
  rm -f /srv/export/deleg.$vers
  echo "NFSv$vers: nfsd recalled a read delegation over the rpcrdma2 backchannel in $t s"
}

# pass VERS LABEL FILE...: writes the files and a long symlink, lists a large directory, reads
# everything back and compares, checking the chunk counts of each mount.
pass() {
  vers=$1 label=$2
  shift 2
  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers ($label) on the rpcrdma2 server failed"
  grep -q "/mnt/nfs nfs.*proto=rdma,port=20050" /proc/mounts || fail "not an RDMA mount on port 20050"
  echo "small file over NFSv$vers" >/mnt/nfs/small.$vers || fail "write over NFSv$vers ($label)"
  for f in "$@"; do
    t=$(now)
    timeout 900 cp /tmp/$f /mnt/nfs/$f.$vers || fail "writing $f over NFSv$vers ($label)"
    timeout 300 sync
    echo "NFSv$vers ($label): $f written in $(since $t) s"
  done
  timeout 60 ln -s "$target" /mnt/nfs/link.$vers || fail "4000-byte symlink over NFSv$vers ($label)"
  r=$(count 1) w=$(count 2) p=$(count 3)
  echo "NFSv$vers ($label) writing: read chunks $r, write chunks $w, reply chunks $p"
  [ "${r:-0}" -gt 0 ] || fail "no Read chunk used by writes over NFSv$vers ($label)"
  timeout 60 umount /mnt/nfs || fail "umount"

  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "remount vers=$vers ($label)"
  [ "$(timeout 60 cat /mnt/nfs/small.$vers)" = "small file over NFSv$vers" ] ||
    fail "small file read back over NFSv$vers ($label) differs"
  for f in "$@"; do
    t=$(now)
    timeout 900 cmp /tmp/$f /mnt/nfs/$f.$vers || fail "$f read back over NFSv$vers ($label) differs"
    echo "NFSv$vers ($label): $f read back and compared in $(since $t) s"
    cmp /tmp/$f /srv/export/$f.$vers || fail "the server's copy of $f differs"
  done
  # The names alone (a glob reads the directory and stats nothing): READDIR replies in Reply
  # chunks, not a GETATTR per entry.
  t=$(now)
  n=$(timeout 120 sh -c 'set -- /mnt/nfs/many/*; echo $#')
  [ "$n" = 3000 ] || fail "listing 3000 entries over NFSv$vers ($label) gave $n"
  echo "NFSv$vers ($label): 3000 entries listed in $(since $t) s"
  [ "$(timeout 60 readlink /mnt/nfs/link.$vers)" = "$target" ] ||
    fail "the 4000-byte symlink read back over NFSv$vers ($label) differs"
  r=$(count 1) w=$(count 2) p=$(count 3) inv=$(count 4)
  echo "NFSv$vers ($label) reading: read chunks $r, write chunks $w, reply chunks $p, regions invalidated by the client $inv"
  [ "${w:-0}" -gt 0 ] || fail "no Write chunk used by reads over NFSv$vers ($label)"
  [ "${p:-0}" -gt 0 ] || fail "no Reply chunk used by the listing over NFSv$vers ($label)"
  # Every chunk is a region at least; the replies' Send With Invalidate spare the client the
  # LOCAL_INV of those that were the only one of their call.
  [ "${inv:-0}" -lt $((r + w + p)) ] ||
    fail "the client invalidated every region itself over NFSv$vers ($label): no Send With Invalidate"
  timeout 60 umount /mnt/nfs || fail "umount"
  for f in "$@"; do rm -f /srv/export/$f.$vers; done
  rm -f /srv/export/link.$vers /srv/export/small.$vers
  echo "NFSv$vers ($label), C client -> rpcrdma2 server: written, listed, read back and compared"
}

pass 3 default f300k f4m f64m
b=$(bcts)
pass 4.1 default f300k f4m
bcts_check 4.1 default $b
b=$(bcts)
pass 4.2 default f300k f4m
bcts_check 4.2 default $b
recall 4.1
recall 4.2

# The C client's inline thresholds at 1024 bytes: its sysctls need CONFIG_SUNRPC_DEBUG, but it
# also takes the smaller of its own and the server's (RFC 8797 private data), and rpcrdma2
# advertises its inline_threshold.
# nfsd cannot drop one listener: it stops, rpcrdma2 is loaded again, and nfsd starts.
rdma2_server_unload
modprobe rpcrdma2 coexist=1 inline_threshold=1024 || fail "rpcrdma2 inline_threshold=1024"
nfs_server_start
echo 'rdma2 20050' >/proc/fs/nfsd/portlist || fail "nfsd refuses the rdma2 listener again"
wait_port 20050 || fail "nothing listens on 20050 again"
pass 3 inline-1024 f300k f4m
b=$(bcts)
pass 4.1 inline-1024 f300k f4m
bcts_check 4.1 inline-1024 $b
! dmesg | grep -E 'rpcrdma2: (a callback|backchannel: .* [1-9][0-9]* replies dropped)' ||
  fail "the rpcrdma2 backchannel reported callback errors"
! dmesg | grep -q 'rpcrdma2: .*ERR_CHUNK' || fail "the rpcrdma2 server answered a call with ERR_CHUNK"
dmesg | grep 'rpcrdma2:' | tail -n 6

# nfsd stopping closes our listener and connections; the module then unloads.
rdma2_server_stop
left_behind "after the rpcrdma2 server"
echo "rpcrdma2 server: NFSv3, NFSv4.1 and NFSv4.2 from the C client, with Read, Write and Reply chunks, beside the C rpcrdma"
