#!/bin/sh
# The busybox image: busybox-static and its applet links, the few /etc files programs expect,
# and sandbox-init at /sbin/sandbox-init, so the image holds everything its guest runs. About
# 3 MB in a 64 MiB sparse ext4. sandbox-init stays PID 1 from the initramfs: no /sbin/init.
#
# usage: guest/image/busybox.sh SANDBOX_INIT
# Prints the path of rootfs.ext4 (under $SANDBOX_CACHE/images, see lib.sh and docs/images.md).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=guest/image/lib.sh
. "$here/lib.sh"
image_init busybox "$here/busybox.sh"

if [ "$#" -ne 1 ]; then
	echo "usage: $0 SANDBOX_INIT" >&2
	exit 2
fi
init=$1
if [ ! -f "$init" ] || [ ! -x "$init" ]; then
	image_die "$init is not an executable file"
fi
# a dynamic sandbox-init would not find its libraries in this image
! ldd "$init" >/dev/null 2>&1 || image_die "$init is dynamically linked; it must be static"

size=64M
image_need_pkg busybox-static e2fsprogs
busybox=/bin/busybox
bb_ver=$(image_pkg_version busybox-static)
image_begin "busybox-static $bb_ver
e2fsprogs $(image_pkg_version e2fsprogs)
sandbox-init $(sha256sum < "$init" | cut -c1-64)
size $size"

r=$image_root
for d in bin sbin usr usr/bin usr/sbin etc root home dev proc sys run tmp var var/tmp mnt; do
	mkdir -p "$r/$d"
done
chmod 0700 "$r/root"
chmod 1777 "$r/tmp" "$r/var/tmp"

cp "$busybox" "$r/bin/busybox"
chmod 0755 "$r/bin/busybox"
# what `busybox --install -s` makes, without running busybox on the target tree: one absolute
# symlink per applet at its usual place. Not init or linuxrc: PID 1 is sandbox-init.
"$busybox" --list-full | while IFS= read -r applet; do
	case "$applet" in
	sbin/init | linuxrc | bin/busybox | "") continue ;;
	esac
	mkdir -p "$r/$(dirname "$applet")"
	ln -s /bin/busybox "$r/$applet"
done
[ -L "$r/bin/sh" ] || image_die "busybox has no sh applet"

cp "$init" "$r/sbin/sandbox-init"
chmod 0755 "$r/sbin/sandbox-init"

cat > "$r/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
# tty is gid 5: sandbox-init mounts devpts with gid=5
cat > "$r/etc/group" <<'GROUP'
root:x:0:
tty:x:5:
nogroup:x:65534:
GROUP
echo sandbox > "$r/etc/hostname"
cat > "$r/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	sandbox
HOSTS
bb_upstream=${bb_ver#*:}
bb_upstream=${bb_upstream%%-*}
cat > "$r/etc/os-release" <<OSREL
NAME="Sandbox BusyBox"
ID=sandbox-busybox
VERSION_ID="$bb_upstream"
PRETTY_NAME="Sandbox BusyBox image (BusyBox $bb_upstream)"
IMAGE_ID=busybox
IMAGE_VERSION=$image_key
OSREL
printf 'busybox-static %s\n' "$bb_ver" > "$image_work/packages"

image_finish "$size"
