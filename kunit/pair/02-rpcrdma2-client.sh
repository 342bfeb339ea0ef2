# timeout: 1800
# rpcrdma2's client transport against the stock C server on another host.
#   a: NFS client over rpcrdma2 (the C rpcrdma is never loaded)    b: NFS server (C nfsd, rdma 20049)
# Rounds of providers (a b): rsiw on both sides, then the C siw on both. The first round mounts
# NFSv3, NFSv4.0, NFSv4.1 and NFSv4.2 with proto=rdma, the second NFSv4.1 (rpcrdma2's client
# with small inline thresholds runs in scenario 19, against rpcrdma2's server). Each mount
# writes a 300 KiB and a 4 MiB random file (and, over rsiw with the default threshold, a 64 MiB
# one over NFSv3: the slowest part of the run over the emulated link), a directory of 20 entries and a
# symlink with a 3,000-byte target, remounts, reads everything back and compares, and lists a directory of
# 3,000 entries the server made (one create per entry over NFS would take minutes under
# emulation); checks the transport's mountstats line and that the chunks were used (Read
# chunks for the writes and the symlink, Write chunks for the reads, Reply chunks for the
# directory), and the version negotiation: rpcrdma2 runs with version=2, so each transport's
# first message is its RDMA2_CONNPROP (the Version 2 probe); the C server answers ERR_VERS and the
# transport speaks Version 1 from then on (mountstats: version 1, one refused probe, one
# RDMA2_CONNPROP sent and none received). Then, for NFSv4.1 and NFSv4.2, a callback over the session's backchannel (on the
# same RDMA connection): a holds open a file b created, for which nfsd hands a read delegation;
# b checks that it did and that the callback path is UP (nfsd set up its callback client on the
# session's connection: it sends no CB_NULL probe from NFSv4.1 on), then writes the file
# locally, which makes nfsd recall the delegation (a CB_COMPOUND of CB_SEQUENCE and CB_RECALL);
# the write must finish within seconds (without a returned delegation it waits for the 45 s
# lease break time) and a must have sent a DELEGRETURN. Then both sides delete their device and
# must have no RDMA resource left; at the end a unloads rpcrdma2, whose transports log the
# callbacks they served: one per recall at least, none dropped.
. /tests/lib.sh
. /pair/lib.sh
modprobe rsiw || fail "modprobe rsiw"
modprobe siw || fail "modprobe siw"
# A failed round leaves its mount and its device behind: on the way out they go (each try
# bounded: a task stuck in the kernel cannot be waited for), so that later scenarios start clean.
trap 'rc=$?; [ $rc = 0 ] || pair_cleanup' EXIT
case $ROLE in
  a)
    # An earlier scenario's NFS client loaded the C rpcrdma: it goes first.
    modprobe -r rpcrdma 2>/dev/null || true
    ! grep -q '^rpcrdma ' /proc/modules || fail "the C rpcrdma cannot be unloaded"
    modprobe rpcrdma2 version=2 || fail "modprobe rpcrdma2 version=2"
    # lockd (NFSv3) registers with the local rpcbind.
    rpcbind_start
    dd if=/dev/urandom of=/tmp/small bs=1k count=300 2>/dev/null
    dd if=/dev/urandom of=/tmp/big bs=1M count=4 2>/dev/null
    dd if=/dev/urandom of=/tmp/huge bs=1M count=64 2>/dev/null
    target=$(printf 'a-long-symlink-target-%04d/' $(seq 115) | head -c 3000)
    ;;
esac

# The NFSv4 minor versions whose sessions have a backchannel, and the file of each that b
# creates for a to hold a delegation on.
BC_VERSIONS="4.1 4.2"

# delegreturns: the DELEGRETURN calls of the mount on /mnt/nfs so far (mountstats' per-op line).
delegreturns() {
  grep -A 300 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats |
    awk '$1 == "DELEGRETURN:" { print $2; found = 1; exit } END { if (!found) print 0 }'
}

# uptime_ms: milliseconds since boot.
uptime_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# callback_a VERS: a's side of the callback check of NFSv$VERS (see the top).
callback_a() {
  local vers=$1 before after
  mkdir -p /mnt/nfs
  timeout 60 mount -t nfs -o vers=$vers,proto=rdma,port=20049 $PEER_ADDR:/srv/export /mnt/nfs ||
    fail "mount vers=$vers over rpcrdma2 for the callback"
  before=$(delegreturns)
  hold_open /mnt/nfs/deleg.$vers || fail "open deleg.$vers for reading over NFSv$vers/rpcrdma2"
  read -r first </mnt/nfs/deleg.$vers || fail "read deleg.$vers over NFSv$vers/rpcrdma2"
  [ "$first" = "created on b" ] || fail "deleg.$vers reads back \"$first\""
  pair_sync held-$round-$vers || fail "b did not come to check the delegation of NFSv$vers"
  pair_sync written-$round-$vers 200 || fail "b did not write deleg.$vers"
  after=$(delegreturns)
  let_go
  [ "$after" -gt "$before" ] ||
    fail "NFSv$vers: no DELEGRETURN after the recall (mountstats: $before before, $after after)"
  timeout 30 grep -q "changed on b" /mnt/nfs/deleg.$vers || fail "b's change of deleg.$vers not seen"
  # The mount may stay busy (EBUSY) for a moment after the held file is closed: a few tries.
  for _ in $(seq 40); do timeout 60 umount /mnt/nfs 2>/dev/null && break; sleep 0.5; done
  ! grep -q ' /mnt/nfs ' /proc/mounts || fail "umount after the callback of NFSv$vers"
  echo "round $round ($providers): NFSv$vers over rpcrdma2: the C server recalled a read delegation over the backchannel (CB_RECALL) and the client returned it (DELEGRETURN $before -> $after)"
}

# callback_b VERS: b's side of the callback check of NFSv$VERS; deleg.$VERS exists already.
callback_b() {
  local vers=$1 t0 t1
  # The client holds the file open: the same wait as a's whole round of copies before it.
  pair_sync held-$round-$vers 600 || fail "a did not open deleg.$vers"
  deleg_holder $vers deleg.$vers
  t0=$(uptime_ms)
  timeout 120 sh -c "echo 'changed on b' >>/srv/export/deleg.$vers" || fail "writing deleg.$vers on b"
  t1=$(uptime_ms)
  echo "NFSv$vers: the local write of deleg.$vers waited $((t1 - t0)) ms for the delegation"
  [ $((t1 - t0)) -lt 15000 ] ||
    fail "NFSv$vers: the write waited $((t1 - t0)) ms: the delegation was not returned on recall"
  pair_sync written-$round-$vers || fail "a did not see the write of deleg.$vers"
}

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

round=0 recalls=0
# Each round: a's provider, b's, rpcrdma2's inline threshold and the NFS versions mounted.
for providers in "rsiw rsiw 4096 3 4.0 4.1 4.2" "siw siw 4096 4.1"; do
  round=$((round + 1))
  set -- $providers
  pa=$1 pb=$2 threshold=$3
  shift 3
  versions=$*
  # The round's versions with a backchannel.
  bc_versions=
  for vers in $versions; do
    case " $BC_VERSIONS " in *" $vers "*) bc_versions="$bc_versions $vers" ;; esac
  done
  recalls=$((recalls + $(echo $bc_versions | wc -w)))
  case $ROLE in a) dev=${pa}0 ;; b) dev=${pb}0 ;; esac
  timeout 30 rdma link add $dev type ${dev%0} netdev eth0 || fail "rdma link add $dev"
  case $ROLE in
    a)
      pair_sync serving-$round
      for vers in $versions; do
        t0=$(date +%s)
        mkdir -p /mnt/nfs
        opts=vers=$vers,proto=rdma,port=20049
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs ||
          fail "mount $opts over rpcrdma2 on $dev failed"
        grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || { cat /proc/mounts; fail "not an RDMA mount"; }
        grep -q '^rpcrdma2 [0-9]* [1-9]' /proc/modules || fail "the mount does not use rpcrdma2"
        timeout 120 cp /tmp/small /mnt/nfs/small.$vers || fail "300 KiB write over NFSv$vers/rpcrdma2"
        timeout 240 cp /tmp/big /mnt/nfs/big.$vers || fail "4 MiB write over NFSv$vers/rpcrdma2"
        # 64 MiB: WRITEs of 1 MiB, each a Read chunk of one or two registered regions.
        huge=
        # Not over the C siw: with the C siw on both sides, 64 MiB of WRITEs with Read chunks
        # lose replies to the C server (the C client too: 188 transmissions for 128 WRITEs,
        # a reconnect, 127 s), and each loss costs a 60 s call timeout.
        case "$pa/$pb/$threshold/$vers" in rsiw/rsiw/4096/3) huge=1 ;; esac
        if [ -n "$huge" ]; then
          t1=$(date +%s)
          timeout 300 cp /tmp/huge /mnt/nfs/huge.$vers || fail "64 MiB write over NFSv$vers/rpcrdma2"
          huge_write=$(( $(date +%s) - t1 ))
        fi
        mkdir /mnt/nfs/dir.$vers
        (cd /mnt/nfs/dir.$vers && for i in $(seq 20); do : >entry-with-a-longer-name-$i; done) ||
          fail "creating 20 files over NFSv$vers/rpcrdma2"
        ln -s "$target" /mnt/nfs/link.$vers || fail "a symlink with a 3000-byte target"
        # The transport's line: "xprt: rdma", the C transport's 27 columns and our 10: the
        # connection's RPC-over-RDMA version, the Version 2 probes the server refused, the
        # RDMA2_CONNPROP messages sent and received, the server's RBSIZ, the continued calls
        # and their Sends, the continued replies received and their Sends, and the regions the
        # server's Sends invalidated.
        line=$(xprt_line)
        echo "mountstats after writing: $line"
        set -- $line
        [ "$2" = rdma ] && [ $# = 40 ] || fail "mountstats transport line: $line"
        [ "${30}" = 1 ] && [ "${31}" = 1 ] && [ "${32}" = 1 ] && [ "${33}" = 0 ] &&
          [ "${35}" = 0 ] && [ "${36}" = 0 ] && [ "${37}" = 0 ] && [ "${38}" = 0 ] ||
          fail "not Version 1 after one refused Version 2 probe, or continued messages: $line"
        # Columns 13 and 16: Read chunks and the bytes they carried.
        [ "${13}" -gt 0 ] && [ "${16}" -ge $((4 << 20)) ] ||
          fail "the writes did not go as Read chunks: $line"
        timeout 60 umount /mnt/nfs || fail "umount"
        timeout 60 mount -t nfs -o $opts $PEER_ADDR:/srv/export /mnt/nfs || fail "remount $opts"
        check_tree /mnt/nfs $vers
        if [ -n "$huge" ]; then
          # Read over the mount first (timed), then compared from the page cache: busybox cmp
          # is slow enough under emulation to hide the transport's time.
          t1=$(date +%s)
          timeout 300 cat /mnt/nfs/huge.$vers >/dev/null || fail "64 MiB read over NFSv$vers/rpcrdma2"
          t2=$(date +%s)
          timeout 300 cmp /tmp/huge /mnt/nfs/huge.$vers || fail "64 MiB read back over NFSv$vers/rpcrdma2 differs"
          rm /mnt/nfs/huge.$vers
          huge=", 64 MiB (written in $huge_write s, read in $((t2 - t1)) s, compared in $(( $(date +%s) - t2 )) s)"
        fi
        line=$(xprt_line)
        echo "mountstats after reading: $line"
        set -- $line
        # Columns 14, 15 and 17: Write chunks, Reply chunks, bytes the server wrote.
        [ "${14}" -gt 0 ] && [ "${17}" -ge $((4 << 20)) ] ||
          fail "the reads did not come as Write chunks: $line"
        [ "${15}" -gt 0 ] || fail "the directory listing used no Reply chunk: $line"
        # Column 39: regions the C server invalidated with Send With Invalidate, which the
        # client offers (RFC 8797) and the C server uses for a call of one region (a READ's
        # Write chunk); column 27: the client's own LOCAL_INVs.
        [ "${39}" -gt 0 ] || fail "the C server invalidated no region of ours: $line"
        echo "remote invalidation: ${39} regions invalidated by the C server, ${27} LOCAL_INVs"
        rm -r /mnt/nfs/small.$vers /mnt/nfs/big.$vers /mnt/nfs/dir.$vers /mnt/nfs/link.$vers
        timeout 60 umount /mnt/nfs || fail "umount"
        echo "round $round ($pa/$pb, inline threshold $threshold): NFSv$vers over rpcrdma2 to the C server: 300 KiB, 4 MiB$huge, 20 entries and a long symlink written, read back and compared; 3000 entries listed ($(( $(date +%s) - t0 )) s)"
      done
      for vers in $bc_versions; do callback_a $vers; done
      pair_sync unmounted-$round
      ;;
    b)
      nfs_server_start
      mkdir -p /srv/export/listing
      (cd /srv/export/listing && for i in $(seq 3000); do : >entry-with-a-longer-name-$i; done)
      for vers in $bc_versions; do echo 'created on b' >/srv/export/deleg.$vers; done
      pair_sync serving-$round
      for vers in $bc_versions; do callback_b $vers; done
      pair_sync unmounted-$round 300
      rm -f /srv/export/deleg.*
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
    # One line per transport that carried callbacks, logged as it went.
    dmesg | grep 'rpcrdma2: backchannel:' || true
    # version=2: every transport's probe was refused, none spoke Version 2.
    dmesg | grep 'rpcrdma2: .*refused the Version 2 probe' | tail -n 1
    dmesg | grep -q 'rpcrdma2: .*refused the Version 2 probe' || fail "no Version 2 probe was refused"
    ! dmesg | grep -q 'rpcrdma2: .*RPC-over-RDMA v2' || fail "a transport spoke Version 2 to the C server"
    n=$(dmesg | grep -c 'rpcrdma2: backchannel: [1-9][0-9]* callbacks served' || true)
    [ "$n" -ge "$recalls" ] ||
      fail "$n rpcrdma2 transports logged callbacks served, fewer than the recalls"
    ! dmesg | grep 'rpcrdma2: backchannel:' | grep -v ' 0 callbacks dropped' ||
      fail "rpcrdma2 dropped callbacks"
    ;;
esac
