# timeout: 1500
# RPC-over-RDMA Version 2 between rpcrdma2's client and its server in one kernel, over rsiw:
# rpcrdma2 registers both classes "rdma" (no C rpcrdma), nfsd listens on "rdma 20049", and
# mounts over proto=rdma go to it through rsiw1 (the client connects to the device's own
# address). The calls and replies use every chunk type: Read chunks for the writes, Write chunks
# for the reads, Reply chunks for a 3,000-entry listing.
# With version=2 the client's first message is its RDMA2_CONNPROP (the Version 2 probe), the
# server answers with its own and both sides say so in the kernel log; the transport's
# mountstats line (column 30: the connection's version, 31: refused probes, 32 and 33:
# RDMA2_CONNPROP sent and received, 34: the server's RBSIZ, 35 and 36: continued replies
# received and their Sends) shows it, and so do rpcrdma2's debugfs files while a mount is up
# (/sys/kernel/debug/rpcrdma2/client-N for the transport, server-N for the server's connection):
# the version on both sides, each side's properties as it sent them and as the other received
# them, the client's values that mountstats has too, and the largest callback the transport
# offered the NFSv4.1 session (a page in Version 2, continued over up to eight Sends within the
# server's RBSIZ of 1024; one Send's worth in Version 1); they go with their transports after the
# umount, and the directory with the module. The server runs with
# server_inline_threshold=1024 server_max_segment_size=262144 and the client with the default
# 4096: the server's RSSIZ of 256 KiB bounds the client's segments (column 40: the longest
# offered), and its RBSIZ of 1024
# makes the client send the call that creates a 3,000-byte symlink, which its own threshold
# would have sent inline and Version 1 sends with the target in a Read chunk, as a continued
# call, target included (Message Continuation: up to four Sends, the last with the call's
# chunks; mountstats column 35: continued calls, 36: their Sends), which the server reassembles
# and serves (it logs its count of continued calls and their messages when the connection
# closes); and its SBSIZ of
# 1024 makes the client plan chunks for replies larger than that. Files of a page, 300 KiB and
# 4 MiB, the symlink and the listing are written, read back after a remount and compared over
# NFSv4.1 and NFSv3. Between the two, the reverse direction in Version 2 (draft section 4.5): the client
# holds a file open for reading over NFSv4.1 (a read delegation, nfsd's callback path UP) and
# the file is written on the server, so nfsd recalls the delegation over the Version 2
# connection's backchannel (CB_SEQUENCE and CB_RECALL without RDMA2_F_RESPONSE, the client's
# reply with it; both sides' RDMA2_CONNPROP say BRS RDMA2_RVRSDIR_CONT); the client returns
# it (a DELEGRETURN in mountstats' per-op counts) and the write goes on within 10 s (45 s, the
# lease break time, without). The server logs the callbacks it sent in Version 2 and the client
# those it served, none dropped. rpcrdma2 is loaded with reverse_inline_threshold=80 there, so
# the callbacks and their replies go continued (Message Continuation in the reverse direction,
# draft section 4.4.2 with RDMA2_RVRSDIR_CONT: each side counts those it sent and reassembled).
# Then the other way: a client of inline_threshold=1024 and a server of 4096, whose send
# threshold follows the client's RBSIZ down to 1024 (its log says so). There replies of 1 to
# 4 KiB come continued (draft section 4.4.2): the mount's rsize=2048 caps each READDIR at 2 KiB
# of entries, for which the client provisions no Reply chunk (its largest reply fits four Sends
# of 1024 bytes) and the server sends each in three Sends. A directory of 400 entries (about 25
# READDIRs; the 3,000-entry one would take some 180, each a few hundred milliseconds under
# emulation) is listed and its names compared with the server's; columns 35 and 36 count the
# continued replies and their Sends, and the server logs its own counts when the connection
# closes. A 3,000-byte symlink made on the server is read back and compared: its READLINK,
# whose reply buffer is a page and more, still gets a Reply chunk (column 15). Then rpcrdma2
# loads again
# with inline_threshold=1024 version=1 (the default version): the same pass over NFSv4.1 stays
# in Version 1 (column 30: 1) without RDMA2_CONNPROP nor continued calls, the symlink's target
# going in a Read chunk (its bytes count in column 16, the bytes the server pulled by RDMA Read,
# beside the files'), and the server says it speaks Version 1.
# In each Version 2 phase a short conversation (a mount making the symlink, another reading it
# back) is captured for the host, which decodes it with the protocol core after the run
# (scripts/check-captures.sh): every message in Version 2, each side's RDMA2_CONNPROP first,
# the continued calls reassembled.
. /tests/lib.sh
# The log checks below look at this scenario's messages only (scenario 17's probe speaks
# Version 1 to the rpcrdma2 server).
dmesg -c >/dev/null
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"

# Earlier scenarios' NFS servers and clients loaded the C rpcrdma: it goes first.
timeout 30 rpc.nfsd 0 2>/dev/null || true
modprobe -r rpcrdma 2>/dev/null || true
! grep -q '^rpcrdma ' /proc/modules || fail "the C rpcrdma cannot be unloaded: $(grep '^rpcrdma ' /proc/modules)"
NFS_RDMA_MODULE=rpcrdma2

mkdir -p /mnt/nfs
opts=proto=rdma,port=20049
dd if=/dev/urandom of=/tmp/f300k bs=1k count=300 2>/dev/null
dd if=/dev/urandom of=/tmp/f4m bs=1M count=4 2>/dev/null
dd if=/dev/urandom of=/tmp/f4k bs=4096 count=1 2>/dev/null
target=$(printf 'a-long-symlink-target-%04d/' $(seq 115) | head -c 3000)

# start_with ARGS...: rpcrdma2 loaded with ARGS, both classes, and nfsd on "rdma 20049".
start_with() {
  modprobe rpcrdma2 "$@" || fail "modprobe rpcrdma2 $*"
  dmesg | grep 'rpcrdma2: client transport "rdma" registered' | tail -n 1
  nfs_server_start
  grep -q '^rdma 20049' /proc/fs/nfsd/portlist || fail "no rdma listener in the portlist"
  wait_port 20049 || fail "nothing listens on 20049"
  mkdir -p /srv/export/many
  (cd /srv/export/many && seq 3000 | xargs touch) || fail "cannot make the directory to list"
}

# xprt_line: the transport's mountstats line for /mnt/nfs.
xprt_line() {
  grep -A 30 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats | grep 'xprt:'
}

# check_xprt WHEN: the transport's line has our 40 columns, speaks version $want, no probe was
# refused, RDMA2_CONNPROP went both ways in Version 2 (none, nor continued calls or replies, in
# Version 1) and the server's RBSIZ is $rbsiz; with $rssiz set (the server's RSSIZ), no segment
# the client offered (column 40: the longest) was longer; writes its Read, Write and Reply chunk
# counts, the bytes pulled by RDMA Read, the continued calls and their Sends, the continued
# replies and their Sends to /tmp/chunks.
check_xprt() {
  when=$1
  line=$(xprt_line)
  echo "mountstats $when: $line"
  set -- $line
  [ "$2" = rdma ] && [ $# = 40 ] || fail "mountstats transport line ($when): $line"
  [ "${30}" = "$want" ] || fail "the transport speaks RPC-over-RDMA version ${30}, not $want: $line"
  [ "${31}" = 0 ] || fail "the server refused ${31} Version 2 probes: $line"
  if [ "$want" = 2 ]; then
    [ "${32}" -ge 1 ] && [ "${33}" -ge 1 ] ||
      fail "RDMA2_CONNPROP did not go both ways ($when: ${32} sent, ${33} received): $line"
    [ "${34}" = "$rbsiz" ] || fail "the server's RBSIZ is ${34}, not $rbsiz: $line"
    [ -z "$rssiz" ] || [ "${40}" -le "$rssiz" ] ||
      fail "the client offered a segment of ${40} bytes to a server whose RSSIZ is $rssiz: $line"
    echo "${40}" >>/tmp/segments
  else
    [ "${32}" = 0 ] && [ "${33}" = 0 ] && [ "${34}" = 0 ] ||
      fail "RDMA2_CONNPROP on a Version 1 transport: $line"
    [ "${35}" = 0 ] && [ "${36}" = 0 ] && [ "${37}" = 0 ] && [ "${38}" = 0 ] ||
      fail "continued calls or replies on a Version 1 transport: $line"
  fi
  echo "${13} ${14} ${15} ${16} ${35} ${36} ${37} ${38}" >/tmp/chunks
}

# check_remote_invalidation WHEN: the client offers remote invalidation and the server takes it
# up. Column 39 counts the client's regions the server's Sends invalidated, 27 its LOCAL_INVs.
# Version 2: every call with chunks names its first region in rdma_inv_handle, so each READ
# (Write chunk) and each call with a Reply chunk has one invalidated by the server. Version 1:
# the server invalidates a call's region when it is its only one (a READ's Write chunk), at
# most one per call with chunks.
check_remote_invalidation() {
  when=$1
  set -- $(xprt_line)
  if [ "$want" = 2 ]; then
    [ "${39}" -gt 0 ] && [ "${39}" -ge $((${14} + ${15})) ] ||
      fail "remote invalidation ($when): the server invalidated ${39} regions for ${14} + ${15} calls with Write or Reply chunks: $*"
  else
    [ "${39}" -gt 0 ] && [ "${39}" -le $((${13} + ${14} + ${15})) ] ||
      fail "remote invalidation ($when): the server invalidated ${39} regions for ${13} + ${14} + ${15} chunks: $*"
  fi
  echo "remote invalidation ($when): ${39} regions invalidated by the server's Sends, ${27} by LOCAL_INV"
}

# rpcrdma2's debugfs directory: one file per client transport (client-N) and one per server
# connection (server-N), numbered in order of creation, of key: value lines.
dbg=/sys/kernel/debug/rpcrdma2
dbg_shown=

# dbg_value FILE KEY: the value of KEY in FILE.
dbg_value() { sed -n "s/^$2: //p" "$1" 2>/dev/null; }

# dbg_newest KIND: the newest file of KIND (client or server), the current mount's.
dbg_newest() {
  local n
  n=$(ls $dbg 2>/dev/null | sed -n "s/^$1-//p" | sort -n | tail -n 1)
  [ -z "$n" ] || echo $dbg/$1-$n
}

# check_debugfs WHEN: with a mount up, the client transport's file and the server connection's
# say version $want and no refused probe, and the client's values that mountstats has too
# (RDMA2_CONNPROP sent and received, the longest segment) are the same. In Version 2 each
# side's properties as it sent them and the other received them: the server's RSSIZ ($rssiz)
# and RBSIZ ($rbsiz), the client's RBSIZ ($client_rbsiz), and the client's send threshold
# down to the server's RBSIZ. For an NFSv4.1 or 4.2 mount (VERS), the largest callback the
# transport offered the session when it was created: a page where both sides take continued
# reverse-direction messages (Version 2: eight Sends carry it), else what one Send carries (the
# send threshold less the 28 bytes of a Version 1 header). Sets dbg_client and dbg_server to
# the two files.
check_debugfs() {
  local when=$1 vers=${2:-} check bc
  dbg_client=$(dbg_newest client)
  dbg_server=$(dbg_newest server)
  [ -n "$dbg_client" ] && [ -n "$dbg_server" ] ||
    fail "debugfs ($when): no client or no server file in $dbg: $(ls $dbg 2>&1 | tr '\n' ' ')"
  if [ -z "$dbg_shown" ]; then
    echo "debugfs ($when): $dbg has $(ls $dbg | tr '\n' ' ')"
    head -n 100 $dbg_client $dbg_server
    dbg_shown=1
  fi
  set -- $(xprt_line)
  for check in "$dbg_client version $want" "$dbg_server version $want" \
    "$dbg_client v2_probe_refused no" "$dbg_client connprop_sent ${32}" \
    "$dbg_client connprop_received ${33}" "$dbg_client largest_segment ${40}"; do
    set -- $check
    [ "$(dbg_value $1 $2)" = "$3" ] || fail "debugfs ($when): $1 says $2: $(dbg_value $1 $2), not $3"
  done
  if [ "$want" = 2 ]; then
    set -- "$dbg_server sent_rssiz $rssiz" "$dbg_client received_rssiz $rssiz" \
      "$dbg_server sent_rbsiz $rbsiz" "$dbg_client received_rbsiz $rbsiz" \
      "$dbg_client sent_rbsiz $client_rbsiz" "$dbg_server received_rbsiz $client_rbsiz" \
      "$dbg_client inline_send $((rbsiz < client_rbsiz ? rbsiz : client_rbsiz))"
  else
    set -- "$dbg_client received_rbsiz none" "$dbg_server sent_rbsiz none"
  fi
  case $vers in
    4.1 | 4.2)
      if [ "$want" = 2 ]; then
        bc=4096
      else
        bc=$(dbg_value $dbg_client inline_send)
        [ "$bc" -le 4096 ] || bc=4096
        bc=$((bc - 28))
      fi
      set -- "$@" "$dbg_client backchannel_max_payload $bc"
      ;;
  esac
  for check in "$@"; do
    set -- $check
    [ "$(dbg_value $1 $2)" = "$3" ] || fail "debugfs ($when): $1 says $2: $(dbg_value $1 $2), not $3"
  done
}

# dbg_gone WHEN: the files of the last check_debugfs went with their transports (the mount's
# transport and the server's connection are freed shortly after the umount).
dbg_gone() {
  for _ in $(seq 100); do
    [ -e "$dbg_client" ] || [ -e "$dbg_server" ] || return 0
    sleep 0.2
  done
  fail "debugfs ($1): $(ls $dbg_client $dbg_server 2>/dev/null | tr '\n' ' ')still there 20 s after the umount"
}

now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# pass VERS: the file matrix over NFSv$VERS, in RPC-over-RDMA version $want.
pass() {
  vers=$1
  t0=$(now)
  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=$vers over rpcrdma2 (version $want) failed"
  grep -q "/mnt/nfs nfs.*proto=rdma" /proc/mounts || fail "not an RDMA mount"
  for f in f4k f300k f4m; do
    timeout 300 cp /tmp/$f /mnt/nfs/$f.$vers || fail "writing $f over NFSv$vers (version $want)"
  done
  timeout 60 ln -s "$target" /mnt/nfs/link.$vers || fail "3000-byte symlink over NFSv$vers"
  timeout 120 sync
  check_xprt "after writing over NFSv$vers"
  check_debugfs "after writing over NFSv$vers" $vers
  set -- $(cat /tmp/chunks)
  [ "${1:-0}" -gt 0 ] || fail "no Read chunk used by the writes over NFSv$vers (version $want)"
  if [ "$want" = 2 ]; then
    # The symlink's call of 3,000 bytes and more does not fit 1024: several Sends.
    [ "${5:-0}" -ge 1 ] && [ "${6:-0}" -ge $((2 * ${5:-0})) ] ||
      fail "the 3000-byte symlink's call went in no continued call over NFSv$vers: ${5:-0} continued calls in ${6:-0} Sends"
    [ "${4:-0}" -ge $(((4 << 20) + 300 * 1024)) ] ||
      fail "the files went inline over NFSv$vers (version $want): ${4:-0} bytes pulled by RDMA Read"
    continued=$((continued + ${5:-0}))
  else
    # The files and the symlink's target in Read chunks.
    [ "${4:-0}" -ge $(((4 << 20) + 300 * 1024 + 3000)) ] ||
      fail "the 3000-byte symlink's target went inline over NFSv$vers (version $want): ${4:-0} bytes pulled by RDMA Read"
  fi
  sent="continued calls/Sends ${5:-0}/${6:-0}"
  timeout 60 umount /mnt/nfs || fail "umount"

  timeout 60 mount -t nfs -o vers=$vers,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "remount vers=$vers (version $want)"
  for f in f4k f300k f4m; do
    timeout 300 cmp /tmp/$f /mnt/nfs/$f.$vers || fail "$f read back over NFSv$vers (version $want) differs"
    cmp /tmp/$f /srv/export/$f.$vers || fail "the server's copy of $f differs"
  done
  # A glob reads the directory without a LOOKUP or GETATTR per entry.
  n=$(timeout 120 sh -c 'set -- /mnt/nfs/many/*; echo $#')
  [ "$n" = 3000 ] || fail "listing 3000 entries over NFSv$vers (version $want) gave $n"
  [ "$(timeout 60 readlink /mnt/nfs/link.$vers)" = "$target" ] ||
    fail "the symlink read back over NFSv$vers (version $want) differs"
  check_xprt "after reading over NFSv$vers"
  check_remote_invalidation "after reading over NFSv$vers"
  set -- $(cat /tmp/chunks)
  [ "${2:-0}" -gt 0 ] || fail "no Write chunk used by the reads over NFSv$vers (version $want)"
  [ "${3:-0}" -gt 0 ] || fail "no Reply chunk used by the listing over NFSv$vers (version $want)"
  timeout 60 umount /mnt/nfs || fail "umount"
  dbg_gone "after the umount over NFSv$vers"
  rm -f /srv/export/f4k.$vers /srv/export/f300k.$vers /srv/export/f4m.$vers /srv/export/link.$vers
  echo "NFSv$vers over RPC-over-RDMA version $want, rpcrdma2 client -> rpcrdma2 server: a page, 300 KiB, 4 MiB and a 3000-byte symlink written, read back and compared, 3000 entries listed; read/write/reply chunks $1/$2/$3, $sent ($(since $t0) s)"
}

# capture NAME [OPTIONS,]: a short conversation captured to /share/NAME.pcap (tcpdump on lo,
# which the client's connection to its own address takes) for the host to decode with the
# protocol core after the run (scripts/check-captures.sh): an NFSv4.1 mount (with OPTIONS)
# makes the 3,000-byte symlink, a second one reads it back and lists the directory "some" if
# there is one.
capture() {
  local pid
  [ -d /share ] || fail "no /share for the capture $1"
  tcpdump -Z root -i lo -s 0 -U -B 8192 -w /share/$1.pcap tcp port 20049 2>/tmp/tcpdump.log &
  pid=$!
  sleep 1
  timeout 60 mount -t nfs -o vers=4.1,${2:-}$opts $ADDR1:/srv/export /mnt/nfs || fail "mount ($1)"
  timeout 60 ln -s "$target" /mnt/nfs/captured || fail "the symlink ($1)"
  timeout 60 umount /mnt/nfs || fail "umount ($1)"
  timeout 60 mount -t nfs -o vers=4.1,${2:-}$opts $ADDR1:/srv/export /mnt/nfs || fail "remount ($1)"
  [ "$(timeout 60 readlink /mnt/nfs/captured)" = "$target" ] || fail "the symlink read back ($1)"
  [ ! -d /srv/export/some ] || [ "$(timeout 120 sh -c 'cd /mnt/nfs/some && echo *')" = "$(cd /srv/export/some && echo *)" ] ||
    fail "the listing ($1)"
  rm -f /mnt/nfs/captured
  timeout 60 umount /mnt/nfs || fail "umount ($1)"
  sleep 1
  kill -INT $pid
  wait $pid || true
  echo "capture $1: $(stat -c %s /share/$1.pcap) bytes; $(grep -i 'captured\|dropped' /tmp/tcpdump.log | tr '\n' ' ')"
}

# delegreturns: the DELEGRETURN calls of the mount on /mnt/nfs so far (mountstats' per-op line).
delegreturns() {
  grep -A 300 'mounted on /mnt/nfs with fstype nfs' /proc/self/mountstats |
    awk '$1 == "DELEGRETURN:" { print $2; found = 1; exit } END { if (!found) print 0 }'
}

# recall: the client holds a file open for reading over NFSv4.1 (a read delegation, nfsd's
# callback path UP) and the server writes it locally: nfsd recalls the delegation over the
# backchannel of the Version 2 connection (CB_RECALL), the client returns it (DELEGRETURN) and
# the write goes on within seconds (45 s, the lease break time, without a returned delegation).
recall() {
  local before after t
  echo 'created on the server' >/srv/export/deleg
  timeout 60 mount -t nfs -o vers=4.1,$opts $ADDR1:/srv/export /mnt/nfs ||
    fail "mount vers=4.1 for the recall (version $want)"
  before=$(delegreturns)
  # nfsd hands no delegation while a grace period runs in the network namespace (nfsd's, or
  # lockd's, which an NFSv3 mount or nfsd start begins): the file is opened again until one
  # came, for up to a minute.
  for _ in $(seq 12); do
    exec 3</mnt/nfs/deleg || fail "open deleg over NFSv4.1 (version $want)"
    read -r first <&3 || fail "read deleg over NFSv4.1 (version $want)"
    [ "$first" = "created on the server" ] || fail "deleg reads back \"$first\""
    grep -l 'type: deleg' /proc/fs/nfsd/clients/*/states 2>/dev/null | xargs -r grep -l '"/deleg"' |
      grep -q . && break
    exec 3<&-
    sleep 5
  done
  deleg_holder 4.1 deleg
  t=$(now)
  timeout 120 sh -c "echo 'changed on the server' >>/srv/export/deleg" ||
    fail "writing deleg on the server"
  t=$(since $t)
  awk -v t=$t 'BEGIN { exit !(t < 10) }' ||
    fail "the local write waited $t s: the delegation was not returned on recall (version $want)"
  # The client counts its DELEGRETURN when the reply arrives, which may follow the write.
  for _ in $(seq 20); do
    after=$(delegreturns)
    [ "$after" -gt "$before" ] && break
    sleep 0.5
  done
  [ "$after" -gt "$before" ] ||
    fail "no DELEGRETURN after the recall (mountstats: $before before, $after after)"
  exec 3<&-
  check_xprt "after the recall"
  timeout 30 grep -q "changed on the server" /mnt/nfs/deleg ||
    fail "the server's change of deleg not seen over NFSv4.1 (version $want)"
  # The mount may stay busy (EBUSY) for a moment after the held file is closed: a few tries.
  for _ in $(seq 40); do timeout 60 umount /mnt/nfs 2>/dev/null && break; sleep 0.5; done
  ! grep -q ' /mnt/nfs ' /proc/mounts || fail "umount after the recall (version $want)"
  rm -f /srv/export/deleg
  echo "NFSv4.1 over RPC-over-RDMA version $want: nfsd recalled a read delegation over the backchannel (CB_RECALL), the local write waited $t s, DELEGRETURN $before -> $after"
}

# no_v2_errors: neither side refused a message of the other in Version 2.
no_v2_errors() {
  ! dmesg | grep -q 'rpcrdma2: .*refused the Version 2 probe' || fail "a Version 2 probe was refused"
  ! dmesg | grep -q 'rpcrdma2: .* speaks RPC-over-RDMA v1' || fail "a connection settled on Version 1"
  ! dmesg | grep -q 'rpcrdma2: .*ERR_[A-Z_]* for call' || fail "the server answered a call with an error"
  ! dmesg | grep -q 'rpcrdma2: .*in the transport property exchange' ||
    fail "a message of the property exchange was refused"
  ! dmesg | grep -q 'rpcrdma2: .*no usable answer to our transport properties' ||
    fail "the server did not answer the client's properties"
}

want=2
rbsiz=1024
client_rbsiz=4096
continued=0
start_with version=2 server_inline_threshold=1024 server_max_segment_size=262144 \
  reverse_inline_threshold=80
dmesg | grep -q 'rpcrdma2: server transport "rdma" registered (.*inline threshold 1024 bytes, Version 2 segments of up to 262144 bytes, 16 per call)' ||
  fail "rpcrdma2 did not take server_inline_threshold=1024 server_max_segment_size=262144"
# The server's RSSIZ of 256 KiB bounds the client's segments (check_xprt), 1 MiB READs and
# WRITEs included.
rssiz=262144
rm -f /tmp/segments
pass 4.1
longest=$(sort -n /tmp/segments | tail -n 1)
[ "$longest" = "$rssiz" ] ||
  fail "the longest segment the client offered is $longest bytes, not the server's RSSIZ of $rssiz"
echo "segments: the longest the client offered is $longest bytes, the server's RSSIZ"
recall
pass 3
capture rpcrdma2-v2-server-rbsiz-1024
dmesg | grep 'rpcrdma2: .*RPC-over-RDMA v' | tail -n 6
dmesg | grep -q "rpcrdma2: server $ADDR1:20049: RPC-over-RDMA v2 (draft-01)" ||
  fail "the client did not log Version 2 with the server"
dmesg | grep -q 'rpcrdma2: .* speaks RPC-over-RDMA v2 (draft-01)' ||
  fail "the server did not log a Version 2 client"
# Both sides' properties, and the client's send threshold down to the server's RBSIZ.
dmesg | grep -q "rpcrdma2: server $ADDR1:20049: RPC-over-RDMA v2 transport properties: the server receives 1024 bytes (RBSIZ), sends 1024 (SBSIZ), takes segments of 262144 bytes (RSSIZ), 16 per call (RCSIZ), reverse direction Continued; we send up to 1024 inline, take up to 1024, offer segments of up to 262144 bytes, 8 per call; RDMA2_CONNPROP 1 sent, 1 received" ||
  fail "the client did not log the server's properties (RBSIZ 1024, RSSIZ 262144) and its thresholds and segments following them"
dmesg | grep -q 'rpcrdma2: [0-9.]*:[0-9]*: RPC-over-RDMA v2 transport properties: the client receives 4096 bytes (RBSIZ), sends 4096 (SBSIZ), reverse direction Continued; we send up to 1024 inline; RDMA2_CONNPROP 1 sent, 1 received' ||
  fail "the server did not log the client's properties (RBSIZ 4096)"
no_v2_errors
rdma2_server_unload
[ ! -e $dbg ] || fail "debugfs: $dbg is still there after rpcrdma2 was unloaded: $(ls $dbg | tr '\n' ' ')"
# Each connection that took continued calls says how many when it closes (nfsd stopped).
dmesg | grep 'rpcrdma2: .*: closed; continued calls received' || true
got=$(dmesg | sed -n 's/.*rpcrdma2: .*: closed; continued calls received: \([0-9]*\) (\([0-9]*\) messages), \([0-9]*\) broken.*/\1 \2 \3/p' |
  awk '{ c += $1; m += $2; b += $3 } END { print c + 0, m + 0, b + 0 }')
set -- $got
[ "$1" -ge 2 ] && [ "$1" -ge "$continued" ] && [ "$2" -ge $((2 * $1)) ] && [ "$3" = 0 ] ||
  fail "the server took $1 continued calls in $2 messages ($3 broken sequences); the client sent $continued"
echo "the server reassembled $1 continued calls from $2 messages (the client counted $continued)"
# Each connection that sent replies With Invalidate says how many when it closes.
set -- $(dmesg | sed -n 's/.*rpcrdma2: .*: closing: \([0-9]*\) replies sent With Invalidate, \([0-9]*\) rdma_inv_handle.*/\1 \2/p' |
  awk '{ s += $1; u += $2 } END { print s + 0, u + 0 }')
[ "$1" -gt 0 ] && [ "$2" = 0 ] ||
  fail "the server logged $1 replies sent With Invalidate in Version 2 ($2 rdma_inv_handle values matching no segment)"
echo "the server sent $1 replies With Invalidate of the region rdma_inv_handle named"
# The recall's callbacks: the server sent them on a Version 2 connection and the client
# served them, neither dropping any.
dmesg | grep 'rpcrdma2: backchannel' || true
dmesg | grep -q 'rpcrdma2: backchannel: [1-9][0-9]* callbacks served, [1-9][0-9]* replies sent, 0 callbacks dropped' ||
  fail "the client served no callback over Version 2"
dmesg | grep -q 'rpcrdma2: backchannel: [1-9][0-9]* callbacks sent in RPC-over-RDMA v2, [1-9][0-9]* replies received, 0 replies dropped' ||
  fail "the server sent no callback over Version 2 (or dropped replies)"
! dmesg | grep 'rpcrdma2: backchannel:' | grep -vE ' 0 (callbacks|replies) dropped' ||
  fail "the backchannel dropped callbacks or replies over Version 2"
# Both sides take continued reverse-direction messages (BRS RDMA2_RVRSDIR_CONT), and with
# reverse_inline_threshold=80 every callback and reply longer than 80 bytes went continued.
dmesg | grep -q 'rpcrdma2: backchannel: .*continued: [1-9][0-9]* callbacks sent in [0-9]* Sends, [1-9][0-9]* replies received in [0-9]* Sends' ||
  fail "the server sent no continued callback, or received no continued reply"
dmesg | grep -q 'rpcrdma2: backchannel: .*continued: [1-9][0-9]* callbacks received in [0-9]* Sends, [1-9][0-9]* replies sent in [0-9]* Sends' ||
  fail "the client received no continued callback, or sent no continued reply"

# The other way: the server's send threshold follows the client's RBSIZ, and replies of 1 to
# 4 KiB come continued.
dmesg -c >/dev/null
rbsiz=4096
client_rbsiz=1024
rssiz=1048576
start_with version=2 inline_threshold=1024 server_inline_threshold=4096
ln -s "$target" /srv/export/link.c || fail "a 3000-byte symlink on the server"
mkdir -p /srv/export/some && (cd /srv/export/some && seq 400 | xargs touch) ||
  fail "cannot make the directory of 400 entries"
timeout 60 mount -t nfs -o vers=4.1,rsize=2048,$opts $ADDR1:/srv/export /mnt/nfs ||
  fail "mount vers=4.1 over rpcrdma2 (client inline_threshold=1024)"
names=$(timeout 120 sh -c 'cd /mnt/nfs/some && echo *')
[ "$names" = "$(cd /srv/export/some && echo *)" ] ||
  fail "listing 400 entries (client inline_threshold=1024) gave $(echo $names | wc -w) names, or others"
[ "$(timeout 60 readlink /mnt/nfs/link.c)" = "$target" ] ||
  fail "the 3000-byte symlink read back (client inline_threshold=1024) differs"
check_xprt "with a client of inline_threshold=1024"
check_debugfs "with a client of inline_threshold=1024" 4.1
set -- $(xprt_line)
[ "${37}" -gt 0 ] && [ "${38}" -ge $((2 * ${37})) ] ||
  fail "no continued replies (or fewer than two Sends each) with a client of inline_threshold=1024: $*"
[ "${15}" -gt 0 ] || fail "the READLINK of the 3000-byte target used no Reply chunk: $*"
client_continued="${37} continued replies in ${38} Sends"
timeout 60 umount /mnt/nfs || fail "umount"
capture rpcrdma2-v2-client-rbsiz-1024 rsize=2048,
rm -rf /srv/export/link.c /srv/export/some
dmesg | grep 'rpcrdma2: .*transport properties' | tail -n 2
dmesg | grep -q 'rpcrdma2: [0-9.]*:[0-9]*: RPC-over-RDMA v2 transport properties: the client receives 1024 bytes (RBSIZ), sends 1024 (SBSIZ), reverse direction Continued; we send up to 1024 inline' ||
  fail "the server's send threshold did not follow the client's RBSIZ of 1024"
dmesg | grep -q "rpcrdma2: server $ADDR1:20049: RPC-over-RDMA v2 transport properties: the server receives 4096 bytes (RBSIZ), sends 4096 (SBSIZ), takes segments of 1048576 bytes (RSSIZ), 16 per call (RCSIZ), reverse direction Continued; we send up to 1024 inline, take up to 1024, offer segments of up to 1048576 bytes, 8 per call" ||
  fail "the client did not log the server's properties (RBSIZ 4096)"
no_v2_errors
rdma2_server_unload
# Each Version 2 connection logs its continued replies when it closes.
dmesg | grep 'rpcrdma2: .*closing a Version 2 connection'
set -- $(dmesg | sed -n 's/.*closing a Version 2 connection: \([0-9]*\) continued replies sent, in \([0-9]*\) Sends.*/\1 \2/p' |
  awk '{ r += $1; s += $2 } END { print r + 0, s + 0 }')
[ "$1" -gt 0 ] && [ "$2" -ge $((2 * $1)) ] ||
  fail "the server logged no continued replies (or fewer than two Sends each): $1 in $2 Sends"
echo "continued replies: the client received $client_continued, the server sent $1 in $2 Sends"

want=1
rbsiz=0
rssiz=
dmesg -c >/dev/null
start_with inline_threshold=1024 version=1
dmesg | grep -q 'rpcrdma2: client transport "rdma" registered (RPC-over-RDMA Version 1 only' ||
  fail "rpcrdma2 did not take version=1"
pass 4.1
dmesg | grep 'rpcrdma2: .*RPC-over-RDMA v' | tail -n 4
dmesg | grep -q "rpcrdma2: server $ADDR1:20049: RPC-over-RDMA v1" ||
  fail "the client did not log Version 1 with the server"
dmesg | grep -q 'rpcrdma2: .* speaks RPC-over-RDMA v1' || fail "the server did not log a Version 1 client"
! dmesg | grep -q 'rpcrdma2: .*RPC-over-RDMA v2' || fail "a connection spoke Version 2 with version=1"
rdma2_server_stop
left_behind "after rpcrdma2 client and server"
echo "rpcrdma2 <-> rpcrdma2: RPC-over-RDMA Version 2 negotiated with RDMA2_CONNPROP both ways, each side's send threshold following the other's RBSIZ, calls and replies continued over several Sends and reassembled, Version 1 with version=1, every chunk type, data compared"
