#!/bin/sh
# Hostile or broken Linux boot inputs, made at test time from the real guest kernel: each must
# give exit status 2 and a one-line reason before any vCPU runs. The input is made here; the
# VMM runs where payload guests run (route.sh), the input handed over with it.
# usage: bad_linux.sh CASE VMM BZIMAGE VMLINUX
set -u
here=$(cd "$(dirname "$0")" && pwd)
case_=$1 vmm=$2 bzimage=$3 vmlinux=$4
build=$(cd "$(dirname "$vmm")/.." && pwd)
for f in "$bzimage" "$vmlinux"; do
	[ -e "$f" ] || { echo "SKIP: guest kernel $f not built (run tools/dev setup)"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() {
	"$here/route.sh" "$build" --timeout 50 --add "$tmp" -- \
		"$here/expect.sh" --status 2 --timeout 30 "$@"
}

case "$case_" in
truncated-bzimage)
	head -c 1000000 "$bzimage" >"$tmp/bz"
	expect --grep "kernel $tmp/bz is a truncated bzImage" -- "$vmm" --kernel "$tmp/bz" ;;
initrd-too-big)
	truncate -s 100M "$tmp/initrd"
	expect --grep "initrd $tmp/initrd \(102400 KiB\) does not fit in guest RAM" -- \
		"$vmm" --kernel "$bzimage" --initrd "$tmp/initrd" --memory 64 ;;
cmdline-too-long)
	long=$(head -c 3000 /dev/zero | tr '\0' 'x')
	expect --grep 'kernel command line too long: 3000 bytes, this kernel accepts at most [0-9]+' -- \
		"$vmm" --kernel "$bzimage" --cmdline "$long" ;;
vmlinux-no-pvh)
	objcopy --remove-section .notes "$vmlinux" "$tmp/vmlinux"
	expect --grep 'is an ELF without a PVH entry note' -- "$vmm" --kernel "$tmp/vmlinux" ;;
kernel-needs-more-memory)
	# init_size (setup header offset 0x260) claims 512 MiB: the kernel cannot fit in 128 MiB.
	cp "$bzimage" "$tmp/bz"
	printf '\000\000\000\040' | dd of="$tmp/bz" bs=1 seek=$((0x260)) conv=notrunc 2>/dev/null
	expect --grep 'guest memory too small for kernel .*: it needs [0-9]+ MiB' -- \
		"$vmm" --kernel "$tmp/bz" --memory 128 ;;
*)
	echo "bad_linux.sh: unknown case $case_" >&2
	exit 2 ;;
esac
