#!/bin/sh
# The disk benchmark (tools/dev bench disk), run where Linux guests boot (natively, or inside
# the emulated KVM host: tools/dev picks). The same workload (tools/bench/diskio.c) runs on
# this host against a fresh sparse file, then in a guest against /dev/vda, backed by a fresh
# blank layer file of the same size in the same directory: sequential 1 MiB writes (then
# fdatasync, which the guest turns into a virtio-blk FLUSH), sequential 1 MiB reads, random
# 4 KiB reads from --threads threads. The guest opens its disk with O_DIRECT, so each of its
# reads and writes is a virtio-blk request served by io_uring through the host page cache, as
# the host's own buffered I/O is. RUNS runs each, medians compared; last line:
#   disk seq_read_ratio=<guest/host> seq_write_ratio=<..> rand4k_read_ratio=<..>
#
# usage: disk.sh BUILD_DIR KERNEL [RUNS]
set -eu
build=$1 kernel=$2 runs=${3:-3}
size=${DISK_BENCH_MIB:-128} ops=${DISK_BENCH_RAND_OPS:-4000} threads=${DISK_BENCH_THREADS:-4}
diskio=$build/tools/bench/diskio
initrd=$build/tools/bench/diskio-initramfs.cpio
vmm=$build/vmm/sandbox-vmm
layer_tool=$build/tools/disk/sandbox-disk
# Both files in one directory: DISK_BENCH_DIR, else $TMPDIR or /var/tmp. In the emulated
# host that is its RAM (its only disk is a small copy of the build dir): the backing store is
# then as fast as it gets, and the ratios show the I/O path's own cost most harshly.
dir=${DISK_BENCH_DIR:-${TMPDIR:-/var/tmp}}
tmp=$(mktemp -d "$dir/bench-disk.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

args="--size $size --rand-ops $ops --threads $threads"
field() { # field NAME LINE
	echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
median() {
	sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

: >"$tmp/host" && : >"$tmp/guest" && : >"$tmp/qemu"
i=0
while [ "$i" -lt "$runs" ]; do
	i=$((i + 1))
	rm -f "$tmp/host.img" "$tmp/guest.layer"
	# shellcheck disable=SC2086 # $args is a list of words
	line=$("$diskio" $args "$tmp/host.img") || { echo "disk: host run failed: $line" >&2; exit 1; }
	echo "host  run $i: $line" >&2
	echo "$line" >>"$tmp/host"
	"$layer_tool" create "$tmp/guest.layer" "${size}M" >/dev/null
	out=$("$vmm" --kernel "$kernel" --initrd "$initrd" --memory 256 --cpus 2 --timeout 900 \
		--disk "$tmp/guest.layer" \
		--cmdline "console=ttyS0 reboot=k panic=-1 quiet rdinit=/init diskio.args=--direct,$(echo $args | tr " " ","),/dev/vda" 2>&1) || {
		echo "disk: the guest run failed:" >&2
		echo "$out" | tail -20 >&2
		exit 1
	}
	line=$(echo "$out" | grep '^diskio seq_write') || {
		echo "disk: the guest printed no result:" >&2
		echo "$out" | tail -20 >&2
		exit 1
	}
	echo "guest run $i: $line" >&2
	echo "$line" >>"$tmp/guest"
	# For reference, QEMU's virtio-blk (io_uring, writeback cache) on a raw file, same guest.
	if [ -n "${DISK_BENCH_QEMU:-1}" ] && command -v qemu-system-x86_64 >/dev/null; then
		rm -f "$tmp/guest.layer"
		truncate -s "${size}M" "$tmp/qemu.img"
		out=$(timeout 900 qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -m 256 \
			-smp 2 -nodefaults -no-user-config -nographic -no-reboot -serial stdio \
			-kernel "$kernel" -initrd "$initrd" \
			-drive id=d0,file="$tmp/qemu.img",format=raw,if=none,cache=writeback,aio=io_uring \
			-device virtio-blk-device,drive=d0 \
			-append "console=ttyS0 reboot=k panic=-1 quiet rdinit=/init diskio.args=--direct,$(echo $args | tr " " ","),/dev/vda" 2>&1)
		line=$(echo "$out" | grep '^diskio seq_write') && {
			echo "qemu  run $i: $line" >&2
			echo "$line" >>"$tmp/qemu"
		}
		rm -f "$tmp/qemu.img"
	fi
done

ratio() { # ratio FIELD [FILE]
	g=$(while read -r l; do field "$1" "$l"; done <"$tmp/${2:-guest}" | median)
	h=$(while read -r l; do field "$1" "$l"; done <"$tmp/host" | median)
	echo "$1 guest=$g host=$h" >&2
	awk -v g="$g" -v h="$h" 'BEGIN { printf "%.3f", (h > 0) ? g / h : 0 }'
}
echo "disk size_mib=$size rand_ops=$ops threads=$threads runs=$runs fs=$(stat -f -c %T "$tmp")" >&2
sr=$(ratio seq_read_mib_s)
sw=$(ratio seq_write_mib_s)
rr=$(ratio rand4k_read_iops)
if [ -s "$tmp/qemu" ]; then
	echo "disk qemu_microvm seq_read_ratio=$(ratio seq_read_mib_s qemu)" \
		"seq_write_ratio=$(ratio seq_write_mib_s qemu)" \
		"rand4k_read_ratio=$(ratio rand4k_read_iops qemu)"
fi
echo "disk seq_read_ratio=$sr seq_write_ratio=$sw rand4k_read_ratio=$rr"
