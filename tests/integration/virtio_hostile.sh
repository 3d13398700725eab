#!/bin/sh
# payload-virtio-hostile against the real virtio-blk: a 1 MiB raw image whose first bytes are
# the magic the payload expects, attached read-only.
#
# usage: virtio_hostile.sh VMM PAYLOAD
set -eu
[ $# -eq 2 ] || { echo "usage: $0 VMM PAYLOAD" >&2; exit 2; }
vmm=$1
payload=$2
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Must match HOSTILE_MAGIC in tests/guests/virtio_hostile.c.
printf 'SBOX-HOSTILE-DISK-0123456789' >"$dir/disk.img"
truncate -s 1M "$dir/disk.img"
status=0
"$here/expect.sh" --needs kvm --timeout 60 --grep '^hostile: all [0-9]+ cases ok' --no-grep FAIL \
	-- "$vmm" --payload "$payload" --disk "$dir/disk.img,ro" --memory 128 || status=$?
exit "$status"
