#!/bin/sh
# Disks seen from inside a real guest, through sandboxctl on the busybox image:
#   - a file written and synced survives a stop and a start on the same overlay;
#   - two sandboxes on two overlays of one base see only their own writes;
#   - the base image's sha256 is unchanged after both wrote to their overlays;
#   - an extra read-only disk (create --disk PATH:ro) reads back the host file's bytes, a
#     write to it fails inside the guest, the sandbox keeps running, the file is unchanged;
#   - a root disk made larger than its image (--disk-size 1) has a root file system of ~1 GiB.
#
# usage: disk_guest.sh SANDBOXCTL VMM KERNEL INITRD
# sandbox_guest.sh decides where the guest boots and runs the checks there (--inner).
set -u
here=$(cd "$(dirname "$0")" && pwd)


. "$here/guest_lib.sh"

# x NAME CMD...: exec in sandbox NAME, output on stdout, the status checked by the caller.
x() {
	n=$1
	shift
	"$ctl" exec "$n" -- "$@"
}

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh # a hung step fails with status 137 instead of stalling
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	base="$SANDBOX_HOME/images/busybox/rootfs"
	base_sum=$(sha256sum <"$base")
	head -c 1048576 /dev/urandom >"$SANDBOX_HOME/data.img"
	data_sum=$(sha256sum <"$SANDBOX_HOME/data.img" | cut -d' ' -f1)

	"$ctl" create --image busybox --memory 256 --timeout 120 --name a >/dev/null ||
		fail "create a"
	"$ctl" create --image busybox --memory 256 --timeout 120 --name b --disk-size 1 \
		--disk "$SANDBOX_HOME/data.img:ro" >/dev/null || fail "create b"
	# df -k: the second line's second field is the size in KiB (the image is 64 MiB).
	kib=$(x b df -k / | awk 'NR == 2 { print $2 }')
	[ "${kib:-0}" -gt 900000 ] || fail "b's root is $kib KiB, not grown to its 1 GiB disk"
	echo "ok: a 1 GiB root disk above the 64 MiB image: / is $kib KiB"
	mark="written-by-a-$$"
	x a sh -c "echo $mark >/root/persist && sync" || fail "write in a"
	x b sh -c 'echo b >/root/b-only && sync' || fail "write in b"
	x b test -e /root/persist && fail "b sees a's file"
	x a test -e /root/b-only && fail "a sees b's file"
	echo "ok: two overlays of one base see only their own writes"

	# The read-only extra disk: its bytes, a refused write, a sandbox still up.
	[ "$(x b cat /sys/block/vdb/ro)" = 1 ] || fail "/dev/vdb is not read-only in the guest"
	got=$(x b sh -c 'dd if=/dev/vdb bs=65536 count=16 2>/dev/null | sha256sum' | cut -d' ' -f1)
	[ "$got" = "$data_sum" ] || fail "/dev/vdb reads $got, the file holds $data_sum"
	if err=$(x b dd if=/dev/zero of=/dev/vdb bs=4096 count=1 conv=fsync 2>&1); then
		fail "a write to the read-only disk succeeded: $err"
	fi
	echo "ok: writing the read-only disk fails in the guest: $(echo "$err" | head -n 1)"
	[ "$(x b echo alive)" = alive ] || fail "the sandbox died after the refused write"
	[ "$(sha256sum <"$SANDBOX_HOME/data.img" | cut -d' ' -f1)" = "$data_sum" ] ||
		fail "the read-only disk's file changed"

	# a's file after a stop and a start on the same overlay.
	"$ctl" stop a || fail "stop a"
	"$ctl" start a >/dev/null || fail "start a"
	got=$(x a cat /root/persist) || fail "cat after the restart"
	[ "$got" = "$mark" ] || fail "after the restart /root/persist holds '$got'"
	echo "ok: a synced file survives a stop and a start"

	"$ctl" rm -f a >/dev/null && "$ctl" rm -f b >/dev/null || fail "rm"
	[ "$(sha256sum <"$base")" = "$base_sum" ] || fail "the base image changed"
	echo "ok: the base image is unchanged ($(echo "$base_sum" | cut -c1-16)...)"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
exec "$here/sandbox_guest.sh" "$here/disk_guest.sh" "$@"
