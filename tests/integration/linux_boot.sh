#!/bin/sh
# Boot the real guest kernel and check the outcome this host can give:
#  - hardware KVM (sandbox-vmm --check exits 0): the guest reaches the sandbox-init banner and
#    the VMM exits 0 (or, with sandbox.panic=1, exits 3 with a panic);
#  - kvm-pvm (--check exits 3): a Linux guest cannot boot; the VMM must stop with the
#    emulation-failure status (5) and say so, not hang.
# usage: linux_boot.sh VMM KERNEL INITRD [banner|panic] [VMM ARGS...]
set -u
here=$(dirname "$0")
vmm=$1 kernel=$2 initrd=$3 want=$4
shift 4
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
"$vmm" --check
check=$?
case "$check" in
0)
	if [ "$want" = panic ]; then
		exec "$here/expect.sh" --timeout 60 --status 3 --grep 'Kernel panic' --grep 'panicked' -- \
			"$vmm" --kernel "$kernel" --initrd "$initrd" \
			--cmdline 'console=ttyS0 reboot=k panic=-1 quiet sandbox.panic=1' "$@"
	fi
	exec "$here/expect.sh" --timeout 60 --grep '^sandbox-init: ready uptime_ms=[0-9]+' -- \
		"$vmm" --kernel "$kernel" --initrd "$initrd" "$@" ;;
3)
	case "$kernel" in
	*bzImage*)
		echo "SKIP: on kvm-pvm a bzImage spends minutes in emulated decompression before it"
		echo "fails; the vmlinux test covers the emulation-failure status here"
		exit 77 ;;
	esac
	exec "$here/expect.sh" --timeout 90 --status 5 --grep 'KVM internal error, suberror 1 \(emulation failure\)' \
		-- "$vmm" --kernel "$kernel" --initrd "$initrd" --timeout 80 "$@" ;;
*)
	echo "SKIP: no usable KVM on this host"
	exit 77 ;;
esac
