#!/bin/sh
# Boot the real guest kernel with its root on virtio-blk (/dev/vda), where this host can.
#
# usage: disk_boot.sh VMM KERNEL INITRD MODE
#   MODE ro       the busybox image itself, read-only (--disk IMAGE,ro, sandbox.rw=0)
#        overlay  a new overlay above the image (sandbox-disk create-overlay), booted
#                 read-write; the image's sha256 must not change
#        debian   the same with the default Debian 12 image (guest/image/debian.sh: about
#                 a minute of debootstrap the first time, then cached)
# Both expect `sandbox-init: root /dev/vda`, the banner and a clean reboot (status 0).
#
# The busybox image is built here when missing (guest/image/busybox.sh, ~2 s, cached). The
# boot and the checks run where a Linux guest boots (route.sh: natively on hardware KVM, else
# in the emulated KVM host): this script calls itself there with --inner.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/check_lib.sh"

# --inner VMM KERNEL INITRD MODE IMAGE: the boot itself, and the checks around it.
inner() {
	vmm=$1 kernel=$2 initrd=$3 mode=$4 image=$5
	build=$(cd "$(dirname "$vmm")/.." && pwd)
	cmdline='console=ttyS0 reboot=k panic=-1 quiet sandbox.root=/dev/vda'
	expect="--status 0 --grep ^sandbox-init:[[:space:]]root[[:space:]]/dev/vda --grep ^sandbox-init:[[:space:]]ready[[:space:]]uptime_ms=[0-9]+ --grep reboot:[[:space:]]Restarting[[:space:]]system"
	case "$mode" in
	ro)
		# shellcheck disable=SC2086 # $expect is a list of words without globs
		exec "$here/expect.sh" --timeout 100 $expect --grep '\(ext4, ro\)' -- \
			"$vmm" --kernel "$kernel" --initrd "$initrd" --timeout 90 \
			--disk "$image,ro" --cmdline "$cmdline sandbox.rw=0" ;;
	overlay)
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		# A full sha256 of a 2 GiB image takes minutes in the emulated host: above 256 MiB
		# the check is the layer format's own (size, mtime, first and last MiB, see
		# docs/disk-format.md) through `sandbox-disk info`; the busybox test hashes it all.
		big=$(($(stat -c %s "$image") > 268435456))
		before=$([ "$big" = 1 ] && stat -c '%s %Y' "$image" || sha256sum <"$image")
		"$build/tools/disk/sandbox-disk" create-overlay "$tmp/root.layer" "$image" || exit 1
		# shellcheck disable=SC2086
		"$here/expect.sh" --timeout 100 $expect --grep '\(ext4, rw\)' -- \
			"$vmm" --kernel "$kernel" --initrd "$initrd" --timeout 90 \
			--disk "$tmp/root.layer" --cmdline "$cmdline" || exit 1
		after=$([ "$big" = 1 ] && stat -c '%s %Y' "$image" || sha256sum <"$image")
		[ "$before" = "$after" ] || fail "the base image changed under its overlay"
		# Mounting ext4 read-write writes its superblock: the overlay took the writes.
		info=$("$build/tools/disk/sandbox-disk" info "$tmp/root.layer") || { echo "$info"; exit 1; }
		echo "$info" | grep -q '^chain: *ok, every parent matches' || {
			echo "$info"
			fail "the overlay's parent no longer matches"
		}
		echo "$info" | grep -Eq '^allocated: +[1-9]' || {
			echo "$info"
			fail "the overlay holds no written cluster"
		}
		echo "ok: base image unchanged ($before)"
		exit 0 ;;
	*)
		echo "disk_boot.sh: unknown mode $mode" >&2
		exit 2 ;;
	esac
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi

vmm=$1 kernel=$2 initrd=$3 mode=$4
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
build=$(cd "$(dirname "$vmm")/.." && pwd)

if [ "$mode" = debian ]; then
	image=$("$top/guest/image/debian.sh") || fail "cannot build the Debian image"
	mode=overlay
else
	image=$("$top/guest/image/busybox.sh" "$build/guest/sandbox-init") || {
		fail "cannot build the busybox image"
	}
fi
[ -f "$image" ] || fail "the image recipe printed $image, which is not a file"

exec "$here/route.sh" "$build" --linux --add "$here" --add "$(dirname "$image")" -- \
	"$here/disk_boot.sh" --inner "$vmm" "$kernel" "$initrd" "$mode" "$image"
