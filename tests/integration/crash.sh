#!/bin/bash
# Crash consistency at every flush point (issue 13). payload-crash writes CRASH_ROUNDS rounds
# to a layer over a raw base, each round's requests in flight together and then a FLUSH, and
# says "crash: flushed R" when the FLUSH completes. The layer lives on crashfs, which logs every
# change the VMM makes to it and every fsync; this script marks the log at each such line.
# crash-check then rebuilds every image a power cut could leave, at every fsync and between
# (a prefix of what followed, random subsets, torn writes), opens each as the VMM would and
# reads every sector: the layer opens, and every write the guest saw flushed is there.
#
# usage: crash.sh SANDBOX_VMM PAYLOAD_CRASH SANDBOX_DISK CRASHFS CRASH_CHECK [SEED]
set -euo pipefail
. "$(dirname "$0")/check_lib.sh"
vmm=$1 payload=$2 disk=$3 crashfs=$4 check=$5
seed=${6:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
sectors=16384         # 8 MiB
cluster_sectors=128   # the layer's default 64 KiB cluster

[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: /dev/kvm is not usable here"; exit 77; }
[ -x "$crashfs" ] || { echo "SKIP: no crashfs: $crashfs"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse here (crashfs needs FUSE)"; exit 77; }

# mounted DIR: in /proc/mounts (busybox, in the emulated host, has no mountpoint).
mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
tmp=$(mktemp -d)
fs_pid=
cleanup() {
	mounted "$tmp/mnt" && umount -l "$tmp/mnt"
	[ -n "$fs_pid" ] && kill "$fs_pid" 2>/dev/null
	if [ -n "${CRASH_KEEP:-}" ]; then echo "kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
mkdir "$tmp/backing" "$tmp/mnt" "$tmp/cuts"

echo "seed $seed"
"$check" mkbase "$tmp/base.raw" "$sectors" "$cluster_sectors" "$seed"
"$disk" create-overlay --cluster-size $((cluster_sectors * 512)) "$tmp/backing/top" "$tmp/base.raw" >/dev/null
cp "$tmp/backing/top" "$tmp/top.init"

"$crashfs" "$tmp/backing" "$tmp/log" "$tmp/mnt" &
fs_pid=$!
for _ in $(seq 100); do
	mounted "$tmp/mnt" && break
	kill -0 "$fs_pid" 2>/dev/null || fail "crashfs did not start"
	sleep 0.1
done
mounted "$tmp/mnt" || fail "crashfs did not mount in 10 s"

# The guest's console, line by line: a mark in the log for each flushed round.
flushed=0 done=0
while IFS= read -r line; do
	echo "$line"
	case "$line" in
	"crash: flushed "*) printf '%s\n' "${line#crash: flushed }" >"$tmp/mnt/.mark"; flushed=$((flushed + 1)) ;;
	"crash: done "*) done=1 ;;
	esac
done < <("$vmm" --payload "$payload" --memory 128 --timeout 120 --disk "$tmp/mnt/top" 2>&1; echo "vmm: exit status $?")
[ "$done" = 1 ] || fail "the guest did not finish (rounds flushed: $flushed)"

umount "$tmp/mnt"
wait "$fs_pid" || { st=$?; fs_pid=; fail "crashfs ended with status $st"; }
fs_pid=
echo "log: $(stat -c %s "$tmp/log") bytes"
"$check" verify "$tmp/base.raw" "$tmp/top.init" "$tmp/log" top "$tmp/cuts" "${CRASH_TRIALS:-8}"
