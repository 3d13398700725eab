#!/bin/bash
# The object store's layer (store/) against Swift's S3 API, started here on loopback and
# stopped after: tests/fleet/store_check.c's checks (S3 calls, chunks, manifests, a second
# snapshot's upload, corrupt and swapped chunks named, another workspace refused, the cache).
#
#   store.sh CHECK...     (fleet-store: STORE_CHECK PATCH_CHECK SNAP_CHECK)
#
# then snap_check.c's: a snapshot pushed by one host and pulled by another (their own
# SANDBOX_HOMEs and keys), its refusals. Each CHECK runs in turn with Swift's address, its
# credentials and a work directory (gc.sh runs its own this way).
#
# Swift's object server wants user xattrs where its device is (swift_s3.py): /var/tmp is ext4
# on our hosts. Where it has none (in the emulated host, tools/devhost, it is tmpfs, which has
# them from Linux 6.6 only; L1 runs 6.1) the test runs in an ext2 file system of its own, made
# in a sparse file there and loop-mounted (as root). The one file system with them there, the
# input disk, has too little room: ~20 MB free, and these checks store ~120 MB.
set -euo pipefail
progs=("$@")
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${FLEET_STORE_TMP-}" ]; then
	work=$(mktemp -d "$FLEET_STORE_TMP/fleet-store.XXXXXX")
else
	work=$(mktemp -d /var/tmp/fleet-store.XXXXXX)
	if ! /usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.fleet-store", b"1")' \
		"$work" 2>/dev/null; then
		trap 'umount "$work" 2>/dev/null || true; rm -rf "$work" "$work.img"' EXIT
		truncate -s 1G "$work.img"
		mke2fs -F "$work.img" >/dev/null
		modprobe loop 2>/dev/null || true
		mount -o loop "$work.img" "$work"
		echo "store.sh: /var/tmp has no user xattrs: Swift on an ext2 file system in $work.img"
		# This script again, in there: when it returns, its service's exit trap
		# (service.sh) has stopped Swift, and this one can unmount.
		FLEET_STORE_TMP=$work "$BASH" "$0" "$@"
		exit 0
	fi
fi
. "$here/service.sh"
# (swift_s3.py gives up after its START_S, 120 s; in the emulated host Swift starts in 17-30 s)
start_service 150 "swift-s3 endpoint=" /usr/bin/python3 "$here/swift_s3.py" "$work/swift" \
	--port $((20000 + RANDOM % 20000))
set -- $service_line
endpoint=${2#endpoint=} access=${3#access=} secret=${4#secret=} region=${5#region=}
for prog in "${progs[@]}"; do
	"$prog" "$endpoint" "$access" "$secret" "$region" "$work"
done
