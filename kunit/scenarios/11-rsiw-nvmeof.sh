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
  nqn=nqn.2026-11.org.rsiw:test
  nvmet_up $ADDR1 $nqn $use_srq
  dev=$(nvme_host_connect $ADDR1 $nqn) || fail "NVMe/RDMA host on rsiw"
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
  nvmet_down $nqn
  left_behind "after NVMe-oF over rsiw (use_srq=$use_srq)"
done
timeout 30 rdma link del rsiw1 || fail "rdma link del rsiw1"
left_behind "after NVMe-oF over rsiw"
