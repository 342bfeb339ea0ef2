# timeout: 720
# rdma-core's own test suite (tests/ of rdma-core 59.0 over its pyverbs, built by
# scripts/rdma-core-suite.sh, patched by kunit/rdma-core/patches/) against the C siw (siw0 on
# dummy0) and rsiw (rsiw0 on dummy1) in the same boot, both through rdma-core's siw user
# provider, every test stopped after $per_test seconds (kunit/rdma-core/run-suite.py). The
# suite picks RoCE GIDs by itself and skips iWARP's (siw's GID is its MAC address followed by
# zeros): the GID index, 0, is passed explicitly. The scenario fails when a test that passes on
# the C siw does not pass on rsiw; Documentation/testing.rst lists the tests that fail or error
# on both and why.
. /tests/lib.sh
two_dummies
modprobe siw || fail "modprobe siw"
modprobe rsiw || fail "modprobe rsiw"
rdma link add siw0 type siw netdev dummy0 || fail "rdma link add siw0"
rdma link add rsiw0 type rsiw netdev dummy1 || fail "rdma link add rsiw0"
# multiprocessing's barriers (the rdma_cm tests) are POSIX semaphores in /dev/shm.
grep -q ' /dev/shm ' /proc/mounts || mount -t tmpfs tmpfs /dev/shm
export LD_LIBRARY_PATH=/opt/rdma-core/lib PYTHONPATH=/opt/rdma-core/python
per_test=45
# The suite's modules less those of other devices (mlx5, EFA, CUDA) and those whose every test
# needs what neither provider has (Documentation/testing.rst).
modules="test_atomic test_cq test_cq_events test_cqex test_device test_fork test_mr test_pd
  test_qp test_rdmacm test_relaxed_ordering test_srq"
suite() {
  python3 /opt/rdma-core/run-suite.py run --tests /opt/rdma-core/share/tests --dev $1 --gid 0 \
    --label $2 --json /tmp/rdma-core-$2.json --timeout $per_test $modules ||
    { tail -n 30 /tmp/rdma-core-$2.json.log; fail "the suite did not run on $1"; }
}
start=$(date +%s)
suite siw0 siw
suite rsiw0 rsiw
echo "both runs: $(( $(date +%s) - start )) s"
python3 /opt/rdma-core/run-suite.py compare /tmp/rdma-core-siw.json /tmp/rdma-core-rsiw.json ||
  fail "a test that passes on the C siw does not pass on rsiw"
rdma link del rsiw0
rdma link del siw0
left_behind "at the end"
