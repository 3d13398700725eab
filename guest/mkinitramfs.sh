#!/bin/sh
# Build the guest initramfs: an uncompressed newc cpio holding sandbox-init as /init, the
# directories init mounts on, and /dev/console (so the kernel can open init's fds 0-2 before
# devtmpfs is mounted). The archive is reproducible: sorted names, owner 0:0, fixed mtimes
# (SOURCE_DATE_EPOCH, default 0). Needs root for mknod.
#
# usage: guest/mkinitramfs.sh OUT.cpio INIT_BINARY
# env:   CPIO  the cpio program (default: cpio from PATH)
set -eu

if [ "$#" -ne 2 ]; then
	echo "usage: $0 OUT.cpio INIT_BINARY" >&2
	exit 2
fi
out=$1
init=$2
cpio=${CPIO:-cpio}
epoch=${SOURCE_DATE_EPOCH:-0}

if [ ! -f "$init" ] || [ ! -x "$init" ]; then
	echo "mkinitramfs: $init is not an executable file" >&2
	exit 1
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/initramfs.XXXXXX")
trap 'rm -rf "$stage" "$out.tmp"' EXIT
trap 'exit 1' HUP INT TERM

for d in dev proc sys tmp run root etc; do
	mkdir "$stage/$d"
done
chmod 0755 "$stage" "$stage/dev" "$stage/proc" "$stage/sys" "$stage/run" "$stage/etc"
chmod 1777 "$stage/tmp"
chmod 0700 "$stage/root"
if ! mknod -m 0600 "$stage/dev/console" c 5 1; then
	echo "mkinitramfs: cannot create dev/console (mknod needs root)" >&2
	exit 1
fi
cp "$init" "$stage/init"
chmod 0755 "$stage/init"
find "$stage" -exec touch -h -d "@$epoch" {} +

(
	cd "$stage"
	find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort |
		"$cpio" -o -H newc --owner=0:0 --reproducible --quiet
) > "$out.tmp"
mv "$out.tmp" "$out"
