# Helpers for scenario scripts (sourced). Addresses come from 198.18.0.0/15, the range set
# aside for benchmarking network devices (RFC 2544): the VM has no NIC, only dummy netdevs.
ADDR0=198.18.0.1
ADDR1=198.18.0.2
# Two more for scenarios that keep a second pair of devices (dummy2, dummy3) up.
ADDR2=198.18.0.3
ADDR3=198.18.0.4

# dummy_up N ADDR: dummyN exists, is up and has ADDR/32.
dummy_up() {
  ip link show dummy$1 >/dev/null 2>&1 || ip link add dummy$1 type dummy
  ip link set dummy$1 up
  ip addr replace $2/32 dev dummy$1
}

# two_dummies: dummy0 = $ADDR0, dummy1 = $ADDR1, both up.
two_dummies() {
  dummy_up 0 $ADDR0
  dummy_up 1 $ADDR1
}

# provider_pairs: the C siw's devices siw0/siw1 on dummy0/dummy1 and rsiw's rsiw0/rsiw1 on
# dummy2/dummy3, so that the two providers run side by side, each on devices of its own;
# server_of PROVIDER is the address of its server's device (${provider}1).
provider_pairs() {
  two_dummies
  dummy_up 2 $ADDR2
  dummy_up 3 $ADDR3
  modprobe siw
  modprobe rsiw
  rdma link add siw0 type siw netdev dummy0
  rdma link add siw1 type siw netdev dummy1
  rdma link add rsiw0 type rsiw netdev dummy2
  rdma link add rsiw1 type rsiw netdev dummy3
}
server_of() { case $1 in siw) echo $ADDR1 ;; rsiw) echo $ADDR3 ;; esac; }

# addr_of DEVICE: the IPv4 address of the RDMA device's netdev.
addr_of() {
  local netdev
  netdev=$(rdma link show "$1/1" | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
  [ -n "$netdev" ] || return 1
  ip -4 -o addr show dev "$netdev" | awk '{split($4, a, "/"); print a[1]; exit}' | grep .
}

# wait_port_free PORT: until nothing listens on TCP PORT any more (max ~10 s). An rdma_cm
# listener goes away after its process has exited: a server started on the same port before
# that would be taken as listening by wait_port, and its client refused.
wait_port_free() {
  for _ in $(seq 50); do
    netstat -ltn 2>/dev/null | grep -q ":$1 " || return 0
    sleep 0.2
  done
  echo "port $1 is still in use"; return 1
}

# wait_port PORT [ADDR]: until something listens on TCP PORT (max ~10 s); with ADDR, until
# something listens on ADDR itself or, on every address, once per RDMA device. An rdma_cm server
# on every address listens on each RDMA device in turn, and rsiw and siw bind such a listener to
# their device, which netstat shows as 0.0.0.0: the first one up need not be ADDR's device, and a
# client started then is refused.
wait_port() {
  local want=1 found
  [ -n "${2:-}" ] && want=$(ls /sys/class/infiniband 2>/dev/null | wc -l)
  [ "$want" -ge 1 ] || want=1
  for _ in $(seq 50); do
    found=$(netstat -ltn 2>/dev/null | awk -v p=":$1" -v a="${2:-}" '
      a == "" && substr($4, length($4) - length(p) + 1) == p { any++ }
      a != "" && $4 == a p { mine++ }
      a != "" && $4 == "0.0.0.0" p { any++ }
      END { print (mine ? 1000 : any + 0) }')
    [ "$found" -ge "$want" ] && return 0
    sleep 0.2
  done
  echo "nothing listens on port $1${2:+ of $2}"; return 1
}

fail() { echo "FAIL: $*"; exit 1; }
# Scripts run under sh -e: a command that fails outside a test ends the script without a FAIL
# line, so its status is printed on the way out.
trap 'rc=$?; [ $rc = 0 ] || echo "the script ended with status $rc"' EXIT

# nfs_server_start: knfsd exporting a tmpfs at /srv/export to every client over TCP and RDMA
# (port 20049), listening on every address (the dummy ones, or eth0's in a pair run), with the
# shortest grace and lease times nfsd takes (10 s) so mounts do not wait 90 s, and lockd's grace
# as short (it starts with nfsd; by default 50 s, during which nfsd hands no delegation, since
# locks_in_grace() counts every lock manager's grace). The server class
# "rdma" is the C rpcrdma's, or that of the module NFS_RDMA_MODULE names (rpcrdma2).
# rpcbind_start: rpcbind runs (a scenario that failed may have left one running: a second
# would abort).
rpcbind_start() {
  mkdir -p /run/rpcbind
  pidof rpcbind >/dev/null || rpcbind -w 2>/dev/null || rpcbind
}

nfs_server_start() {
  modprobe ${NFS_RDMA_MODULE:-rpcrdma}
  modprobe nfsd
  mkdir -p /srv/export /var/lib/nfs/v4recovery /run/rpcbind
  grep -q ' /srv/export ' /proc/mounts || mount -t tmpfs tmpfs /srv/export
  grep -q ' /proc/fs/nfsd ' /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd
  echo '/srv/export *(rw,no_root_squash,insecure,no_subtree_check,fsid=1)' >/etc/exports
  : >/var/lib/nfs/etab
  rpcbind_start
  exportfs -ra
  rpc.mountd
  echo 10 >/proc/fs/nfsd/nfsv4gracetime
  echo 10 >/proc/fs/nfsd/nfsv4leasetime
  echo 10 >/proc/sys/fs/nfs/nlm_grace_period
  rpc.nfsd 4
  echo 'rdma 20049' >/proc/fs/nfsd/portlist
  cat /proc/fs/nfsd/portlist
  sleep 11   # the (shortened) grace period
}

nfs_server_stop() {
  rpc.nfsd 0
  exportfs -ua
  killall rpc.mountd rpcbind 2>/dev/null || true
}

# rdma2_server_unload: nfsd stops, which closes rpcrdma2's listeners and connections, and
# rpcrdma2 unloads (its transports are freed by server threads, so it may be busy a moment).
rdma2_server_unload() {
  nfs_server_stop
  for _ in $(seq 100); do
    modprobe -r rpcrdma2 2>/dev/null && break
    sleep 0.2
  done
  ! grep -q '^rpcrdma2 ' /proc/modules || fail "rpcrdma2 still in use after nfsd stopped"
}

# rdma2_server_stop: the end of a scenario that served with rpcrdma2 beside the C rpcrdma on
# rsiw1: rdma2_server_unload, then rsiw1 goes.
rdma2_server_stop() {
  rdma2_server_unload
  timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
}

# nfs_client_start: what a guest that mounts NFS over RDMA without serving it needs besides the
# kernel: the RPC-over-RDMA module and rpcbind, with which the kernel's lockd registers (NFSv3).
# deleg_holder VERS FILE: nfsd handed the NFSv$VERS client a delegation of FILE (a name under
# the export) and its callback path is UP; prints the delegation and the callback state.
deleg_holder() {
  local minor=${1#4.} d client=
  for d in /proc/fs/nfsd/clients/*; do
    grep -q "^minor version: $minor\$" $d/info 2>/dev/null || continue
    grep "type: deleg" $d/states 2>/dev/null | grep -qF "$2" && client=$d
  done
  if [ -z "$client" ]; then
    for d in /proc/fs/nfsd/clients/*; do cat $d/info $d/states; done
    fail "nfsd handed no delegation of $2 to the NFSv$1 client"
  fi
  grep 'type: deleg' $client/states
  grep 'callback state' $client/info
  grep -q '^callback state: UP$' $client/info || fail "NFSv$1: the callback path is not UP"
}

nfs_client_start() {
  modprobe rpcrdma
  mkdir -p /run/rpcbind
  rpcbind_start
}

nfs_client_stop() {
  killall rpcbind 2>/dev/null || true
  modprobe -r rpcrdma 2>/dev/null || true
}

# left_behind WHEN: fail if a QP, CQ, PD, MR or CM id exists that the RDMA core did not make
# itself (rxe's GSI QP and MAD resources stay).
left_behind() {
  for res in qp cq pd mr cm_id; do
    # The RDMA core's own objects (rxe's GSI QP and MAD resources) stay.
    n=$(rdma resource show $res 2>/dev/null | grep -v '\[ib_core\]' | grep -c . || true)
    [ "$n" = 0 ] || { rdma resource show $res; fail "$n ${res}s left behind ($1)"; }
  done
}

# Benchmark figures are medians over rounds. bench_reset starts a script's figures;
# bench_record NAME UNIT PROVIDER VALUE keeps one round's value (the unit goes in the file name
# with its slash spelt "per"); bench_report prints each figure's values ("rounds ...") and its
# median over the rounds that produced a number ("BENCH name unit provider median", nan if
# none did), which the host collects into bench-results.json.
BENCH_RESULTS=/tmp/bench-results
bench_reset() { rm -rf $BENCH_RESULTS && mkdir -p $BENCH_RESULTS; }
bench_record() { echo "$4" >>"$BENCH_RESULTS/$1 $(echo "$2" | sed 's|/|per|') $3"; }
# bench_pair_ratio NAME UNIT [SUBJECT REFERENCE]: one round's paired ratio of NAME, from the
# values SUBJECT and REFERENCE (rsiw and siw unless told) recorded last, turned so that above 1
# means SUBJECT did better: REFERENCE over SUBJECT for a time (us, ms, s), SUBJECT over
# REFERENCE for anything else. It is kept as the figure "NAME_paired_ratio" of the provider
# "pair" for rsiw against siw, of "pair:SUBJECT:REFERENCE" for any other two (bench-report.py
# puts those in a table of their own).
bench_pair_ratio() {
  local f="$BENCH_RESULTS/$1 $(echo "$2" | sed 's|/|per|')" subject=${3:-rsiw} reference=${4:-siw}
  local tag=pair
  [ "$subject $reference" = "rsiw siw" ] || tag=pair:$subject:$reference
  bench_record ${1}_paired_ratio ratio $tag "$(awk -v r="$(tail -n 1 "$f $subject" 2>/dev/null)" \
    -v s="$(tail -n 1 "$f $reference" 2>/dev/null)" -v u="$2" 'BEGIN {
      if (r !~ /^[0-9.]+$/ || s !~ /^[0-9.]+$/ || r == 0 || s == 0) print "nan"
      else printf "%.3f\n", u ~ /^(us|ms|s)$/ ? s / r : r / s }')"
}
bench_report() {
  local f median
  for f in "$BENCH_RESULTS"/*; do
    set -- $(basename "$f")
    echo "rounds $1 $3: $(tr '\n' ' ' <"$f")"
    median=$(grep -E '^[0-9]+(\.[0-9]+)?$' "$f" | sort -n | awk '{v[NR] = $1}
      END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
           else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    echo "BENCH $1 $(echo "$2" | sed 's|per|/|') $3 $median"
  done
}

# nvmet_up ADDR NQN [USE_SRQ]: an nvmet-rdma target on ADDR:4420 serving subsystem NQN, whose
# namespace is a memory-backed null_blk device (/dev/nullb0); nvme-rdma loaded for a host.
NVMET=/sys/kernel/config/nvmet
nvmet_up() {
  local addr=$1 nqn=$2
  modprobe nvmet || fail "modprobe nvmet"
  modprobe nvmet-rdma use_srq=${3:-0} || fail "modprobe nvmet-rdma"
  modprobe nvme-rdma || fail "modprobe nvme-rdma"
  grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
  modprobe null_blk nr_devices=1 memory_backed=1 gb=1 || fail "modprobe null_blk"
  mkdir $NVMET/subsystems/$nqn
  echo 1 >$NVMET/subsystems/$nqn/attr_allow_any_host
  mkdir $NVMET/subsystems/$nqn/namespaces/1
  echo /dev/nullb0 >$NVMET/subsystems/$nqn/namespaces/1/device_path
  echo 1 >$NVMET/subsystems/$nqn/namespaces/1/enable || fail "enabling the namespace"
  mkdir $NVMET/ports/1
  echo rdma >$NVMET/ports/1/addr_trtype
  echo ipv4 >$NVMET/ports/1/addr_adrfam
  echo $addr >$NVMET/ports/1/addr_traddr
  echo 4420 >$NVMET/ports/1/addr_trsvcid
  ln -s $NVMET/subsystems/$nqn $NVMET/ports/1/subsystems/$nqn || fail "nvmet port on $addr"
}

# nvme_host_connect ADDR NQN [SOURCE_ADDR]: the kernel's NVMe/RDMA host connects to NQN at
# ADDR (from SOURCE_ADDR if given) with a host NQN and id of its own (the image's /etc/nvme
# files need not agree); prints the namespace's block device, or says on stderr what failed.
nvme_host_connect() {
  local hostid dev
  hostid=$(cat /proc/sys/kernel/random/uuid)
  timeout 60 nvme connect -t rdma -a $1 -s 4420 ${3:+-w $3} -n $2 \
    --hostnqn=nqn.2014-08.org.nvmexpress:uuid:$hostid --hostid=$hostid >&2 || {
    echo "nvme connect to $1 failed" >&2; return 1; }
  for _ in $(seq 50); do
    dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
    [ -n "$dev" ] && { echo $dev; return 0; }
    sleep 0.1
  done
  echo "no namespace block device" >&2
  return 1
}

# nvmet_down NQN: the target of nvmet_up taken down and its modules (and nvme-rdma) unloaded.
nvmet_down() {
  rm $NVMET/ports/1/subsystems/$1
  rmdir $NVMET/ports/1
  echo 0 >$NVMET/subsystems/$1/namespaces/1/enable
  rmdir $NVMET/subsystems/$1/namespaces/1
  rmdir $NVMET/subsystems/$1
  modprobe -r nvme-rdma nvmet-rdma nvmet null_blk 2>/dev/null || true
  ! grep -q '^nvmet_rdma ' /proc/modules || fail "nvmet-rdma did not unload"
}
