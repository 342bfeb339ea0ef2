# timeout: 240
# NVMe over Fabrics on rsiw with the kernel's own ULPs: the nvmet-rdma target exports a
# memory-backed null_blk device on rsiw1 (198.18.0.2), and the nvme-rdma host connects to it
# with nvme-cli. 8 MiB of random data is written through the fabric with O_DIRECT, read back
# and compared, also against the target's device; then disconnect and teardown. Twice: with
# the target's receive queues per QP, then with its shared receive queue (nvmet-rdma
# use_srq=1, which also needs rsiw's LAST_WQE_REACHED event to drain QPs without stalling).
. /tests/lib.sh
two_dummies
modprobe rsiw || fail "modprobe rsiw"
rdma link add rsiw1 type rsiw netdev dummy1 || fail "rdma link add rsiw1"
for use_srq in 0 1; do
  modprobe nvmet
  modprobe nvmet-rdma use_srq=$use_srq
  modprobe nvme-rdma
  grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
  modprobe null_blk nr_devices=1 memory_backed=1 gb=1 || fail "modprobe null_blk"
  cfg=/sys/kernel/config/nvmet
  nqn=nqn.2026-11.org.rsiw:test
  mkdir $cfg/subsystems/$nqn
  echo 1 >$cfg/subsystems/$nqn/attr_allow_any_host
  mkdir $cfg/subsystems/$nqn/namespaces/1
  echo /dev/nullb0 >$cfg/subsystems/$nqn/namespaces/1/device_path
  echo 1 >$cfg/subsystems/$nqn/namespaces/1/enable || fail "enabling the namespace"
  mkdir $cfg/ports/1
  echo rdma >$cfg/ports/1/addr_trtype
  echo ipv4 >$cfg/ports/1/addr_adrfam
  echo $ADDR1 >$cfg/ports/1/addr_traddr
  echo 4420 >$cfg/ports/1/addr_trsvcid
  ln -s $cfg/subsystems/$nqn $cfg/ports/1/subsystems/$nqn || fail "nvmet port on rsiw1"

  # A host NQN and id of their own: the image's /etc/nvme files need not agree.
  hostid=$(cat /proc/sys/kernel/random/uuid)
  timeout 60 nvme connect -t rdma -a $ADDR1 -s 4420 -n $nqn \
    --hostnqn=nqn.2014-08.org.nvmexpress:uuid:$hostid --hostid=$hostid ||
    fail "nvme connect over rsiw"
  dev=
  for _ in $(seq 50); do
    dev=$(ls /dev/nvme*n1 2>/dev/null | head -1)
    [ -n "$dev" ] && break
    sleep 0.1
  done
  [ -n "$dev" ] || fail "no namespace block device"
  dd if=/dev/urandom of=/tmp/nvme-data bs=1M count=8 2>/dev/null
  timeout 60 dd if=/tmp/nvme-data of=$dev bs=1M count=8 oflag=direct 2>/dev/null || fail "write over NVMe/RDMA on rsiw"
  timeout 60 dd if=$dev of=/tmp/nvme-back bs=1M count=8 iflag=direct 2>/dev/null || fail "read over NVMe/RDMA on rsiw"
  cmp /tmp/nvme-data /tmp/nvme-back || fail "data read back over NVMe/RDMA on rsiw differs"
  cmp -n 8388608 /tmp/nvme-data /dev/nullb0 || fail "the target's device differs"
  echo "NVMe/RDMA over rsiw (use_srq=$use_srq): 8 MiB written with O_DIRECT, read back and compared (host and target device)"
  start=$(date +%s)
  timeout 60 nvme disconnect -n $nqn || fail "nvme disconnect"
  took=$(( $(date +%s) - start ))
  [ $took -lt 20 ] || fail "nvme disconnect took ${took}s (QP drain stalled?)"
  rm $cfg/ports/1/subsystems/$nqn
  rmdir $cfg/ports/1
  echo 0 >$cfg/subsystems/$nqn/namespaces/1/enable
  rmdir $cfg/subsystems/$nqn/namespaces/1
  rmdir $cfg/subsystems/$nqn
  modprobe -r nvme-rdma nvmet-rdma nvmet null_blk 2>/dev/null || true
  grep -q '^nvmet_rdma ' /proc/modules && fail "nvmet-rdma did not unload"
  left_behind "after NVMe-oF over rsiw (use_srq=$use_srq)"
done
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
left_behind "after NVMe-oF over rsiw"
