#!/bin/sh
# Boot the real guest kernel where a Linux guest boots, and check the outcome.
#
# usage: linux_boot.sh VMM KERNEL INITRD MODE [VMM ARGS...]
#   MODE banner  the guest reaches the sandbox-init banner, reboots, the VMM exits 0
#        panic   the guest panics (sandbox.panic=1), the VMM exits 3
#
# route.sh decides where: natively on hardware KVM, else in the emulated KVM host. A failing
# run shows its last console lines. (How the VMM ends a guest KVM cannot emulate, the fate of
# a Linux guest on kvm-pvm, is payload-emulfail's test, on every machine.)
set -u
here=$(cd "$(dirname "$0")" && pwd)
vmm=$1 kernel=$2 initrd=$3 mode=$4
shift 4
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
cmdline='console=ttyS0 reboot=k panic=-1 quiet'

case "$mode" in
banner)
	expect="--status 0 --grep ^sandbox-init:[[:space:]]ready[[:space:]]uptime_ms=[0-9]+ --grep reboot:[[:space:]]Restarting[[:space:]]system" ;;
panic)
	cmdline="$cmdline sandbox.panic=1"
	expect="--status 3 --grep Kernel[[:space:]]panic[[:space:]]-[[:space:]]not[[:space:]]syncing --grep guest[[:space:]]kernel[[:space:]]panicked" ;;
*)
	echo "linux_boot.sh: unknown mode $mode" >&2
	exit 2 ;;
esac

build=$(cd "$(dirname "$vmm")/.." && pwd)
# shellcheck disable=SC2086 # $expect is a list of words without globs
exec "$here/route.sh" "$build" --linux --timeout 150 -- \
	"$here/expect.sh" --timeout 120 $expect -- \
	"$vmm" --kernel "$kernel" --initrd "$initrd" --cmdline "$cmdline" --timeout 100 "$@"
