#!/bin/sh
# The runner of the tests that drive a real guest through sandboxctl on the busybox image
# (sandboxctl.sh, disk_guest.sh, ...): it decides where a Linux guest can boot and runs the
# test's checks there.
#
# usage: sandbox_guest.sh TEST SANDBOXCTL VMM KERNEL INITRD
# Natively where Linux boots (sandbox-vmm --check exits 0), inside the emulated KVM host on
# kvm-pvm (exits 3; with the hang retry of devhost_retry.sh), skipped (77) otherwise. There it
# runs `TEST --inner SANDBOXCTL KERNEL INITRD ROOTFS`, ROOTFS being the busybox image (built
# here when missing, ~2 s, cached).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

test=$1 ctl=$2 vmm=$3 kernel=$4 initrd=$5
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
build=$(cd "$(dirname "$vmm")/.." && pwd)
"$vmm" --check
check=$?
case "$check" in 0 | 3) ;; *) echo "SKIP: no usable KVM on this host"; exit 77 ;; esac
rootfs=$("$top/guest/image/busybox.sh" "$build/guest/sandbox-init") || {
	echo "FAIL: cannot build the busybox image"
	exit 1
}
if [ "$check" = 0 ]; then
	exec "$test" --inner "$ctl" "$kernel" "$initrd" "$rootfs"
fi
# SANDBOX_GUEST_DEVHOST: more options for tools/devhost/run (words: --memory, -e NAME=VAL...).
# shellcheck disable=SC2086 # a list of words
exec "$here/devhost_retry.sh" "$build" ${SANDBOX_GUEST_DEVHOST:-} --add "$here" \
	--add "$(dirname "$rootfs")" -- "$test" --inner "$ctl" "$kernel" "$initrd" "$rootfs"
