# The QEMU settings shared by run-vm.sh (one guest) and run-pair.sh (two guests on a link);
# sourced after env.sh, never run.
: "${RSIW_VM_TIMEOUT:=1800}"
: "${RSIW_VM_MEM:=4096}"

# vm_append MODE GLOB: the kernel command line of a guest in MODE running the scenarios GLOB.
vm_append() {
  local mode=$1 only=$2 append="console=ttyS0 panic=-1 oops=panic softlockup_panic=1 rdinit=/init"
  # The test kernel: a WARN (or a KASAN report) ends the run where it happened.
  [ "$mode" = test ] && append="$append panic_on_warn=1"
  # The test kernel (test and demo) on 4-level paging: QEMU's `-cpu max` offers LA57, and with
  # 5-level paging 6.12's KASAN finds where its shadow starts from the LA57 feature bit, which
  # identify_cpu() clears for a moment at boot; an interrupt then had its irq_desc lock reported
  # as a wild access (seen once in eight boots).
  case $mode in test | demo) append="$append no5lvl" ;; esac
  # Benchmarks, profiles and the demo's perftest figures: under TCG the clocksource watchdog
  # sometimes finds the TSC skewed against the HPET and switches clocks mid-run, which breaks
  # perftest's cycle-based timing (it prints "inf") and makes every clock read an emulated HPET
  # access (a timed critical-path boot then ran all code, the shared TCP path too, 1.3 to 1.9
  # times slower).
  # (tsc=reliable would do too, but made 1 boot in 3 panic in the IO-APIC timer check.)
  case $mode in bench | profile | demo) append="$append tsc=nowatchdog" ;; esac
  # The demo: PCI interrupt routing from the BIOS table, as in a pair run (run-pair.sh): ACPI's
  # _PRT method for the virtio 9p device runs into ACPICA's loop timeout under TCG, some 23 s
  # of the boot.
  case $mode in demo) append="$append pci=noacpi" ;; esac
  echo "$append rsiw.mode=$mode rsiw.only=$only ${RSIW_VM_APPEND:-}"
}

# vm_qemu LOG SHARE APPEND [QEMU ARGS...]: boot the built kernel and image with the serial
# console in LOG and the directory SHARE (made empty) as the guest's /share (virtio 9p), under
# a hard timeout of RSIW_VM_TIMEOUT seconds, which is noted in LOG. Returns QEMU's status.
vm_qemu() {
  local log=$1 share=$2 append=$3 rc=0
  shift 3
  rm -rf "$share" && mkdir -p "$share"
  timeout -k 10 "$RSIW_VM_TIMEOUT" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp 2 -m "$RSIW_VM_MEM" \
    -nographic -no-reboot -monitor none -serial stdio \
    -virtfs "local,path=$share,mount_tag=rsiwshare,security_model=none,id=share" \
    -kernel "$KTREE/arch/x86/boot/bzImage" -initrd "$RSIW_IMAGE/initramfs.cpio" \
    "$@" ${RSIW_QEMU_ARGS:-} -append "$append" </dev/null >"$log" 2>&1 || rc=$?
  [ "$rc" = 124 ] && echo "run-vm: TIMEOUT after ${RSIW_VM_TIMEOUT}s" >>"$log"
  return "$rc"
}
