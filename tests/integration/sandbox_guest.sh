#!/bin/sh
# The runner of the tests that drive a real guest through sandboxctl on the busybox image
# (sandboxctl.sh, disk_guest.sh, ...): builds the image, then runs the test's checks where a
# Linux guest boots (route.sh: natively on hardware KVM, else in the emulated KVM host).
#
# usage: sandbox_guest.sh TEST SANDBOXCTL VMM KERNEL INITRD
# Runs `TEST --inner SANDBOXCTL KERNEL INITRD ROOTFS`, ROOTFS being the busybox image (built
# here when missing, ~2 s, cached). SANDBOX_GUEST_DEVHOST: more options for route.sh (words:
# --timeout, --memory, --add, -e NAME=VAL).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/check_lib.sh"

test=$1 ctl=$2 vmm=$3 kernel=$4 initrd=$5
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
build=$(cd "$(dirname "$vmm")/.." && pwd)
rootfs=$("$top/guest/image/busybox.sh" "$build/guest/sandbox-init") || {
	fail "cannot build the busybox image"
}
# shellcheck disable=SC2086 # a list of words
exec "$here/route.sh" "$build" --linux ${SANDBOX_GUEST_DEVHOST:-} --add "$here" \
	--add "$(dirname "$rootfs")" -- "$test" --inner "$ctl" "$kernel" "$initrd" "$rootfs"
