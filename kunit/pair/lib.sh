# Helpers of a pair run (scripts/run-pair.sh): two guests, a and b, on one virtio-net link
# (eth0 on both). Sourced by the guest init and by the pair scenarios (kunit/pair/NN-name.sh,
# after /tests/lib.sh). The init exports ROLE (a or b), SELF_ADDR, PEER_ADDR and, while a
# scenario runs, PAIR_SCENARIO (its name).
PAIR_ADDR_A=10.77.0.1
PAIR_ADDR_B=10.77.0.2
PAIR_PREFIXLEN=24
# pair_sync's rendezvous: b listens on this TCP port, a connects to it.
PAIR_SYNC_PORT=7777
# How long pair_sync waits for the peer unless told otherwise (seconds).
PAIR_SYNC_TIMEOUT=120

# pair_addr ROLE: the link address of guest ROLE.
pair_addr() {
  case $1 in a) echo $PAIR_ADDR_A ;; b) echo $PAIR_ADDR_B ;; *) return 1 ;; esac
}

# pair_sync POINT [TIMEOUT]: a barrier. Returns once the peer reached POINT of the same scenario
# too, or fails (status 1, with a line saying why) after TIMEOUT seconds or as soon as the peer
# shows it has left this scenario. Both sides send "SCENARIO/POINT" at once over a short TCP
# connection (busybox nc, b listening, a connecting and retrying) and compare. A peer at another
# point of the same scenario or at an earlier scenario is waited for; one at a later scenario
# (scenarios run in name order, and the init's last point is "~end/...", after every name)
# has given up on ours, so waiting longer would only delay the failure.
pair_sync() {
  local me="${PAIR_SCENARIO:-}/$1" limit=${2:-$PAIR_SYNC_TIMEOUT} deadline now peer last=
  deadline=$(( $(date +%s) + limit ))
  while now=$(date +%s); [ "$now" -lt "$deadline" ]; do
    if [ "$ROLE" = b ]; then
      peer=$({ echo "$me" | timeout $((deadline - now)) nc -l -p $PAIR_SYNC_PORT; } 2>/dev/null) || true
    else
      # A bounded exchange: a peer that stops answering mid-way must not hold us.
      peer=$({ echo "$me" | timeout 20 nc -w 5 "$PEER_ADDR" $PAIR_SYNC_PORT; } 2>/dev/null) || true
    fi
    [ "$peer" = "$me" ] && return 0
    if [ -n "$peer" ]; then
      last=$peer
      if [ "${peer%%/*}" \> "${me%%/*}" ]; then
        echo "pair_sync $1: the peer has left ${me%%/*} (it is at $peer)"
        return 1
      fi
    fi
    # a: nobody listening yet, or the peer elsewhere; b: the port still held. Again shortly.
    if [ "$ROLE" = a ] || [ -z "$peer" ]; then sleep 1; fi
  done
  echo "pair_sync $1: the peer did not come within ${limit}s${last:+ (it was at $last)}"
  return 1
}

# state PID: the process's state letter, empty once it is gone.
state() { sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' /proc/$1/stat 2>/dev/null || true; }
# gone PID: the process has exited (a zombie has).
gone() { case "$(state $1)" in '' | Z) return 0 ;; *) return 1 ;; esac; }

# hold_open FILE: a process of its own holds FILE open for reading (HOLDER, its pid) until
# let_go, not the scenario's shell: a process that exits holding a file on an NFSv4 mount whose
# server is gone waits for the file's CLOSE for as long as the server stays away, even killed.
# The holder writes nowhere, so a scenario that ends does not wait for it.
HOLDER=
hold_open() {
  sleep 3600 <"$1" >/dev/null 2>&1 &
  HOLDER=$!
  for _ in $(seq 100); do
    [ "$(readlink /proc/$HOLDER/fd/0 2>/dev/null)" = "$1" ] && return 0
    kill -0 $HOLDER 2>/dev/null || break
    sleep 0.1
  done
  let_go
  return 1
}

# let_go: the holder of hold_open, if any, is killed and waited for, at most 10 s: one whose
# file's CLOSE cannot reach the server is left behind (see hold_open); returns 1 then.
let_go() {
  local pid=$HOLDER
  [ -n "$pid" ] || return 0
  HOLDER=
  kill -9 $pid 2>/dev/null || true
  for _ in $(seq 50); do
    if gone $pid; then
      wait $pid 2>/dev/null || true
      return 0
    fi
    sleep 0.2
  done
  echo "the holder of a file on the mount ($pid) is still exiting after 10 s"
  return 1
}

# pair_cleanup: what a failed scenario leaves behind goes, so that later scenarios start clean
# (a scenario installs it in its EXIT trap): hold_open's holder, the mount on /mnt/nfs, b's nfsd
# threads and every RDMA device. Each try is bounded: a task stuck in the kernel cannot be
# waited for.
pair_cleanup() {
  local pid n dev
  let_go || true
  if grep -q ' /mnt/nfs ' /proc/mounts; then
    timeout 20 umount -f /mnt/nfs 2>/dev/null || timeout 10 umount -l /mnt/nfs 2>/dev/null || true
  fi
  [ "$ROLE" = b ] && { timeout 30 rpc.nfsd 0 2>/dev/null || true; }
  for dev in $(rdma link show 2>/dev/null | awk '{ print $2 }' | cut -d/ -f1); do
    rdma link del $dev &
    pid=$!
    n=0
    while kill -0 $pid 2>/dev/null && [ $n -lt 150 ]; do sleep 0.2; n=$((n + 1)); done
    kill -0 $pid 2>/dev/null && echo "cleanup: rdma link del $dev still blocked after 30 s"
  done
}

# pair_unload MODULE: MODULE unloaded if it is loaded. A transport goes from a work item once
# its users let go of it, so the module may be busy for a moment after an umount.
pair_unload() {
  grep -q "^$1 " /proc/modules || return 0
  for _ in $(seq 50); do modprobe -r $1 2>/dev/null && break; sleep 0.2; done
  ! grep -q "^$1 " /proc/modules || fail "$1 still in use"
}

# use_client KIND [ARGS...]: the NFS client's RPC-over-RDMA transport is KIND's only: rpcrdma2's
# (loaded with ARGS), or the C rpcrdma's (c or c_rpcrdma); the other is unloaded first (both
# register transport "rdma").
use_client() {
  local kind=$1
  shift
  case $kind in
    rpcrdma2) pair_unload rpcrdma; modprobe rpcrdma2 "$@" || fail "modprobe rpcrdma2 $*" ;;
    c | c_rpcrdma) pair_unload rpcrdma2; modprobe rpcrdma || fail "modprobe rpcrdma" ;;
    *) fail "use_client: no client $kind" ;;
  esac
}

# fio_run NAME ARGS... (the pair benches): fio job NAME on $FILE (64 MiB, direct I/O) with ARGS;
# its terse (v3) line goes to /tmp/fio.out. Fields: 7 read bandwidth (KiB/s), 8 read IOPS, 48
# write bandwidth (KiB/s).
fio_run() {
  local name=$1
  shift
  timeout 120 fio --name=$name --filename=$FILE --size=64M --direct=1 --minimal "$@" \
    >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err >&2; return 1; }
}
# mbps FIELD: field FIELD of /tmp/fio.out, KiB/s, in MB/s.
mbps() { awk -F';' -v k=$1 '{printf "%.1f\n", $k / 1024}' /tmp/fio.out; }
