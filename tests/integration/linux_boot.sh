#!/bin/sh
# Boot the real guest kernel where this host can, and check the outcome.
#
# usage: linux_boot.sh VMM KERNEL INITRD MODE [VMM ARGS...]
#   MODE banner             the guest reaches the sandbox-init banner, reboots, the VMM exits 0
#        panic              the guest panics (sandbox.panic=1), the VMM exits 3
#        emulation-failure  on kvm-pvm a Linux guest cannot boot: the VMM must stop with
#                           status 5 and say so, not hang
#
# Where Linux boots natively (sandbox-vmm --check exits 0) the guest runs here; on kvm-pvm
# (--check exits 3) banner and panic run inside the emulated KVM host (tools/devhost), and
# skip with the reason when its image is not built. A failing run shows its last console lines.
set -u
here=$(cd "$(dirname "$0")" && pwd)
vmm=$1 kernel=$2 initrd=$3 mode=$4
shift 4
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
"$vmm" --check
check=$?
cmdline='console=ttyS0 reboot=k panic=-1 quiet'

case "$mode" in
emulation-failure)
	[ "$check" = 3 ] || { echo "SKIP: this host is not kvm-pvm: there is no emulation failure to see"; exit 77; }
	exec "$here/expect.sh" --timeout 90 --status 5 \
		--grep 'KVM internal error, suberror 1 \(emulation failure\), on vcpu0 at rip 0x' \
		-- "$vmm" --kernel "$kernel" --initrd "$initrd" --timeout 80 "$@" ;;
banner)
	expect="--status 0 --grep ^sandbox-init:[[:space:]]ready[[:space:]]uptime_ms=[0-9]+ --grep reboot:[[:space:]]Restarting[[:space:]]system" ;;
panic)
	cmdline="$cmdline sandbox.panic=1"
	expect="--status 3 --grep Kernel[[:space:]]panic[[:space:]]-[[:space:]]not[[:space:]]syncing --grep guest[[:space:]]kernel[[:space:]]panicked" ;;
*)
	echo "linux_boot.sh: unknown mode $mode" >&2
	exit 2 ;;
esac

# shellcheck disable=SC2086 # $expect is a list of words without globs
case "$check" in
0)
	exec "$here/expect.sh" --timeout 120 $expect -- \
		"$vmm" --kernel "$kernel" --initrd "$initrd" --cmdline "$cmdline" --timeout 100 "$@" ;;
3)
	# The kernel cache and the build dir are shared with the emulated host by default.
	build=$(cd "$(dirname "$vmm")/.." && pwd)
	exec "$here/devhost_retry.sh" "$build" --add "$here" -- \
		"$here/expect.sh" --timeout 100 $expect -- \
		"$vmm" --kernel "$kernel" --initrd "$initrd" --cmdline "$cmdline" --timeout 90 "$@" ;;
*)
	echo "SKIP: no usable KVM on this host"
	exit 77 ;;
esac
