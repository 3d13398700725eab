#!/bin/sh
# Alternating 1 GiB vsock echoes through our VMM and through QEMU microvm with vhost-vsock, the
# same Linux guest on both (issue 13, item 5; docs/benchmarks.md, "1 GiB copies in the emulated
# host"): whose are the stalls and triple faults that long vsock runs met in the emulated host?
# Run where Linux guests boot (natively, or in the emulated host: tools/dev bench vsock-qemu).
#
# The guest is our guest kernel with a tiny initramfs made here: busybox and vsock-echo, whose
# /init serves one echo on vsock port 1234 and reboots. The host side, vsock-echo send, pushes
# VSOCK_QEMU_BYTES (1 GiB) of a fixed stream while it reads the echo, compares every byte and
# fails after VSOCK_QEMU_STALL (60) s without one. Ours is reached through its vsock socket
# (CONNECT 1234), QEMU's through AF_VSOCK (CID 3; vhost_vsock must be loadable). Both VMMs are
# pinned to the same CPU, as tools/devhost/run pins ours there (the emulated host's triple
# faults come when a nested vCPU moves between L1's CPUs). VSOCK_QEMU_RUNS (3) rounds, each
# ours then QEMU; every run has an overall timeout. One line a run, then
#   vsock-qemu ours_ok=N/M qemu_ok=N/M ours_mib_s=<median> qemu_mib_s=<median>
#
# usage: vsock_qemu.sh VMM VSOCK_ECHO KERNEL
set -u
[ $# -eq 3 ] || { echo "usage: vsock_qemu.sh VMM VSOCK_ECHO KERNEL" >&2; exit 2; }
vmm=$1 echo_bin=$2 kernel=$3
bytes=${VSOCK_QEMU_BYTES:-1073741824}
stall=${VSOCK_QEMU_STALL:-60}
runs=${VSOCK_QEMU_RUNS:-3}
limit=$((bytes / 1048576 + 300)) # s: a run at 4 MiB/s, and the boot

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say() { echo "vsock-qemu: $*" >&2; }

modprobe vhost_vsock 2>/dev/null
[ -c /dev/vhost-vsock ] || { say "no /dev/vhost-vsock (modprobe vhost_vsock): cannot run QEMU's leg"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || { say "no qemu-system-x86_64"; exit 77; }
bb=
for b in /bin/busybox /usr/bin/busybox; do
	[ -x "$b" ] && { bb=$b; break; }
done
[ -n "$bb" ] || { say "no busybox (busybox-static) for the guest"; exit 77; }

r=$tmp/groot
mkdir -p "$r/bin" "$r/dev" "$r/proc"
cp "$bb" "$r/bin/busybox"
cp "$echo_bin" "$r/bin/vsock-echo"
cat >"$r/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev 2>/dev/null
exec >/dev/console 2>&1
vsock-echo serve 1234
reboot -f
EOF
chmod +x "$r/init"
(cd "$r" && find . | cpio -o -H newc 2>/dev/null) >"$tmp/initramfs.cpio"

n=$(nproc 2>/dev/null) || n=1
cpu=$((n - 1))

# run NAME SEND_TARGET CMD...: start the VMM, run the echo against it, report, stop it.
run() {
	name=$1 target=$2
	shift 2
	rm -f "$tmp/v.sock"
	taskset -c "$cpu" timeout "$limit" "$@" >"$tmp/$name.console" 2>&1 &
	pid=$!
	out=$(timeout "$limit" "$echo_bin" send "$target" 1234 "$bytes" "$stall")
	st=$?
	# The guest reboots after the echo: give the VMM 30 s to end, then stop it.
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	kill "$pid" 2>/dev/null
	wait "$pid"
	vst=$?
	fault=$(grep -c 'triple fault' "$tmp/$name.console")
	echo "$name: $out (send status $st, VMM status $vst, triple faults $fault)"
	[ "$st" = 0 ] && echo "$out" | sed -n 's/.*mib_s=\([0-9.]*\).*/\1/p' >>"$tmp/$name.rates"
	[ "$st" = 0 ] && ok=1 || ok=0
	echo "$ok" >>"$tmp/$name.oks"
	[ "$st" = 0 ] || tail -n 5 "$tmp/$name.console" | sed "s/^/  $name console: /"
}

cmdline='console=ttyS0 reboot=k panic=-1 quiet rdinit=/init'
for k in $(seq "$runs"); do
	run ours "unix:$tmp/v.sock" "$vmm" --kernel "$kernel" --initrd "$tmp/initramfs.cpio" \
		--memory 256 --cmdline "$cmdline" --vsock "$tmp/v.sock"
	run qemu vsock:3 qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -m 256 \
		-smp 1 -nodefaults -no-user-config -nographic -no-reboot -serial stdio \
		-kernel "$kernel" -initrd "$tmp/initramfs.cpio" \
		-append 'console=ttyS0 reboot=t panic=-1 quiet rdinit=/init' \
		-device vhost-vsock-device,guest-cid=3
done

median() { sort -n "$1" 2>/dev/null | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "none" }'; }
count() { awk '{ s += $1 } END { printf "%d/%d", s, NR }' "$1"; }
echo "vsock-qemu ours_ok=$(count "$tmp/ours.oks") qemu_ok=$(count "$tmp/qemu.oks")" \
	"ours_mib_s=$(median "$tmp/ours.rates") qemu_mib_s=$(median "$tmp/qemu.rates")"
