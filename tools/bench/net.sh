#!/bin/sh
# The network benchmark (tools/dev bench net; docs/benchmarks.md, "net"), run where Linux
# guests boot: natively, or inside the emulated KVM host (tools/dev picks). One run, against
# the fake internet (tests/netfake/fakenet.sh: 203.0.113.10 serves HTTP), legs in this order:
#   host    fakenet get of /bytes/SIZE from the namespace that runs the VMM (no VM, no proxy)
#   ours    the same, and fakenet connect-bench, in a busybox sandbox made by sandboxctl
#           create (--network proxy, the default policy): every byte through the sandbox's
#           tap, its namespace's redirect and sandbox-proxy, which decides by the Host name
#   qemu    the same two in a QEMU microvm guest (our guest kernel, a tiny initramfs made
#           here: busybox + fakenet + /init, ending in reboot -f) on a tap (vhost=off)
#           routed straight to the fake internet: no proxy, no namespace
#   direct  for reference, not in the last line: our VMM (sandbox-vmm --net) on the same tap
#           with the same initramfs, no proxy: splits ours-against-qemu into device and proxy
# Every transfer has a stall timeout (NET_BENCH_STALL s without a byte fails it) and every
# step an overall timeout. Everything made here (fake internet, tap, sandboxes, files) is
# removed at exit, failed or not. Raw figures on stdout and stderr; last line on stdout:
#   net throughput_ratio=<ours/host> qemu_ratio=<qemu/host> connect_ms=<ours> qemu_connect_ms=<qemu>
#
# usage: net.sh BUILD_DIR KERNEL ROOTFS
#   KERNEL: the guest bzImage; ROOTFS: the busybox root image (guest/image/busybox.sh)
# Environment: NET_BENCH_BYTES (268435456), NET_BENCH_COUNT (connections, 30),
# NET_BENCH_STALL (s, 20), NET_BENCH_RUNS (gets per leg, the median counts; 3),
# NET_BENCH_LEGS (some of: host ours qemu direct; default all four).
set -eu
[ $# -eq 3 ] || { echo "usage: net.sh BUILD_DIR KERNEL ROOTFS" >&2; exit 2; }
build=$1 kernel=$2 rootfs=$3
here=$(cd "$(dirname "$0")" && pwd)
bytes=${NET_BENCH_BYTES:-268435456}
count=${NET_BENCH_COUNT:-30}
stall=${NET_BENCH_STALL:-20}
runs=${NET_BENCH_RUNS:-3}
legs=${NET_BENCH_LEGS:-host ours qemu direct}
ctl=$build/tools/sandboxctl/sandboxctl
fakenet=$build/tests/netfake/fakenet
fakenet_sh=$here/../../tests/netfake/fakenet.sh
[ -x /usr/bin/ip ] && ip() { /usr/bin/ip "$@"; } # busybox sh's ip applet has no netns
web=203.0.113.10:80 host=example.test
get_args="get --connect $web --host $host --path /bytes/$bytes --stall $stall"
bench_args="connect-bench --connect $web --host $host --count $count --stall $stall"

say() { echo "net: $*" >&2; }
die() {
	say "$*"
	exit 1
}
[ "$(id -u)" = 0 ] || die "needs root (namespaces, taps)"
for f in "$ctl" "$fakenet" "$kernel" "$rootfs" "$fakenet_sh"; do
	[ -e "$f" ] || die "missing $f"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-net.XXXXXX")
SANDBOX_HOME=$tmp/home
export SANDBOX_HOME
fwd_old=
cleanup() {
	set +e
	for d in "$SANDBOX_HOME"/sandboxes/*; do
		[ -d "$d" ] || continue
		"$ctl" rm -f "${d##*/}" >/dev/null 2>&1
	done
	command -v tap_down >/dev/null && tap_down
	[ ! -d "$tmp/fake" ] || sh "$fakenet_sh" down "$tmp/fake" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# field NAME LINE: the value of NAME=... in LINE.
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# median_of NAME: the median of NAME=... over the lines on stdin.
median_of() {
	tr ' ' '\n' | sed -n "s/^$1=//p" | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

mkdir -p "$tmp/fake" "$SANDBOX_HOME"
sh "$fakenet_sh" up "$tmp/fake" "$fakenet" || die "fakenet.sh up failed"

failed=
host_mbps='' ours_mbps='' ours_ms='' qemu_mbps='' qemu_ms='' direct_mbps='' direct_ms=''

# --- host: the namespace that runs the VMM, straight to the fake internet.
case " $legs " in *" host "*)
	i=0
	: >"$tmp/host.gets"
	while [ $i -lt "$runs" ]; do
		i=$((i + 1))
		# shellcheck disable=SC2086 # word lists
		line=$(timeout 300 "$fakenet" $get_args) || { failed="$failed host"; say "host: fakenet get failed"; break; }
		echo "host get: $line" | tee -a "$tmp/host.gets"
	done
	host_mbps=$(median_of MBps <"$tmp/host.gets")
	;;
esac

# --- ours: a sandbox through its namespace and sandbox-proxy (default policy: public names
# on 80 and 443; 203.0.113.0/24 counts as public). The guest dials the raw IP; the proxy
# takes the name from the Host header, resolves it through the fake DNS and connects there.
ours() {
	"$ctl" images import busybox --kernel "$kernel" --initrd "$build/guest/initramfs.cpio" \
		--rootfs "$rootfs" >/dev/null || { say "ours: images import failed"; return 1; }
	# The console outside the sandbox's directory: a failed create removes that.
	id=$(timeout 300 "$ctl" create --image busybox --memory 256 --timeout 240 \
		--console "$tmp/ours-console.log" --resolver 203.0.113.53) ||
		{ say "ours: sandboxctl create failed (status $?)"; return 1; }
	say "ours: sandbox $id"
	timeout 300 "$ctl" cp "$fakenet" "$id:/tmp/fakenet" || { say "ours: cp fakenet failed"; return 1; }
	i=0
	: >"$tmp/ours.gets"
	while [ $i -lt "$runs" ]; do
		i=$((i + 1))
		# shellcheck disable=SC2086 # word lists
		line=$(timeout 660 "$ctl" exec "$id" --timeout 600 -- /tmp/fakenet $get_args) ||
			{ say "ours: fakenet get in the guest failed"; return 1; }
		echo "ours get: $line" | tee -a "$tmp/ours.gets"
	done
	ours_mbps=$(median_of MBps <"$tmp/ours.gets")
	# shellcheck disable=SC2086 # word lists
	line=$(timeout 660 "$ctl" exec "$id" --timeout 600 -- /tmp/fakenet $bench_args) ||
		{ say "ours: fakenet connect-bench in the guest failed"; return 1; }
	echo "ours $line"
	ours_ms=$(field median "$line")
	"$ctl" rm -f "$id" >/dev/null
}
case " $legs " in *" ours "*)
	if ! ours; then
		failed="$failed ours"
		[ ! -s "$tmp/ours-console.log" ] || {
			say "ours: the sandbox's console ends:"
			tail -n 15 "$tmp/ours-console.log" >&2
		}
		[ ! -s "$tmp/fake/web10-http.log" ] || {
			say "ours: the fake web server's log ends:"
			tail -n 8 "$tmp/fake/web10-http.log" >&2
		}
	fi
	;;
esac

# --- The tap guests: QEMU microvm ("qemu") and, for reference, our own VMM ("direct"), each
# on a tap qtap0 in this namespace (10.0.3.1/30, the guest 10.0.3.2), forwarded straight to the
# fake internet: no proxy, no sandbox namespace. The guest is our guest kernel with a tiny
# initramfs made here whose /init sets eth0 up, runs the same two fakenet commands, prints
# their lines on the console and reboots (which ends both VMMs: see below).
guest_initramfs() {
	[ ! -s "$tmp/net-initramfs.cpio" ] || return 0
	r=$tmp/groot
	mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys"
	bb=
	for b in /bin/busybox /usr/bin/busybox; do
		[ -x "$b" ] && { bb=$b; break; }
	done
	[ -n "$bb" ] || { say "no busybox (busybox-static) for the tap guests"; return 1; }
	cp "$bb" "$r/bin/busybox"
	cp "$fakenet" "$r/bin/fakenet"
	mknod "$r/dev/console" c 5 1 2>/dev/null || true
	cat >"$r/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev 2>/dev/null
exec >/dev/console 2>&1
ip link set lo up
ip link set eth0 up
ip addr add 10.0.3.2/30 dev eth0
ip route add default via 10.0.3.1
for i in \$(seq $runs); do
	if out=\$(fakenet $get_args); then echo "guest get: \$out"; else echo "guest get: failed"; fi
done
if out=\$(fakenet $bench_args); then echo "guest \$out"; else echo "guest connect-bench: failed \$out"; fi
# The guest kernel has no ACPI, so microvm (acpi=off) cannot power it off: poweroff would
# halt and leave QEMU running. A reboot ends both: reboot=t (QEMU) is a triple fault that
# -no-reboot turns into QEMU's exit; reboot=k (ours) is the VMM's clean exit.
reboot -f
EOF
	chmod +x "$r/init"
	(cd "$r" && find . | cpio -o -H newc 2>/dev/null) >"$tmp/net-initramfs.cpio"
}
tap_up() {
	ip tuntap add dev qtap0 mode tap || { say "cannot make qtap0"; return 1; }
	ip addr add 10.0.3.1/30 dev qtap0
	ip link set qtap0 up
	ip -n fakeinet route replace 10.0.3.0/30 via 203.0.113.1
	fwd_old=$(cat /proc/sys/net/ipv4/ip_forward)
	echo 1 >/proc/sys/net/ipv4/ip_forward
}
# Forwarding is on only while a tap guest runs: a namespace made meanwhile (a sandbox's)
# would inherit it.
tap_down() {
	[ -z "$fwd_old" ] || echo "$fwd_old" >/proc/sys/net/ipv4/ip_forward
	fwd_old=
	ip link del qtap0 2>/dev/null || true
	ip -n fakeinet route del 10.0.3.0/30 2>/dev/null || true
}
# tap_guest LEG CMD...: run the VMM command CMD (its console on stdout) with the tap up; sets
# ${LEG}_mbps and ${LEG}_ms from the guest's lines.
tap_guest() {
	leg=$1
	shift
	if ! guest_initramfs || ! tap_up; then
		tap_down
		return 1
	fi
	"$@" </dev/null >"$tmp/$leg.out" 2>&1 || say "$leg: exit status $?"
	tap_down
	tr -d '\r' <"$tmp/$leg.out" | sed -n "s/^guest /$leg /p"
	n=$(tr -d '\r' <"$tmp/$leg.out" | grep -c '^guest get: bytes=') || true
	[ "$n" = "$runs" ] ||
		{ say "$leg: $n of $runs gets; its console ends:"; tail -n 20 "$tmp/$leg.out" >&2; return 1; }
	eval "${leg}_mbps=\$(tr -d '\r' <\"\$tmp/\$leg.out\" | grep '^guest get: bytes=' | median_of MBps)"
	line=$(tr -d '\r' <"$tmp/$leg.out" | grep '^guest connect_ms ') ||
		{ say "$leg: no connect figure; its console ends:"; tail -n 20 "$tmp/$leg.out" >&2; return 1; }
	eval "${leg}_ms=\$(field median \"\$line\")"
}
# In the emulated host our VMM runs pinned to L1's last CPU, every thread on it
# (tools/devhost/vmm-pinned: a nested vCPU that migrates there triple-faults now and then).
# The qemu leg of the last line runs QEMU on that same one CPU, so both VMMs have the same
# machine; qemufree, QEMU free on every CPU, is printed for reference.
pin_cpu=
if [ -n "${DEVHOST:-}" ]; then
	pin_cpu=$(($(nproc) - 1))
fi
qemu_pin() {
	if [ -n "$pin_cpu" ]; then taskset -c "$pin_cpu" "$@"; else "$@"; fi
}
case " $legs " in *" qemu "*)
	# The command line of the other QEMU comparisons (tools/bench/sandbox.sh, bench boot);
	# microvm appends its virtio_mmio.device= words itself.
	tap_guest qemu qemu_pin timeout 600 qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host \
		-m 256 -smp 1 -nodefaults -no-user-config -nographic -no-reboot -serial stdio \
		-kernel "$kernel" -initrd "$tmp/net-initramfs.cpio" \
		-append 'console=ttyS0 reboot=t panic=-1 quiet rdinit=/init' \
		-netdev tap,id=n0,ifname=qtap0,script=no,downscript=no,vhost=off \
		-device virtio-net-device,netdev=n0 || failed="$failed qemu"
	if [ -n "$pin_cpu" ]; then
		tap_guest qemufree timeout 600 qemu-system-x86_64 -M microvm,acpi=off -accel kvm \
			-cpu host -m 256 -smp 1 -nodefaults -no-user-config -nographic -no-reboot \
			-serial stdio -kernel "$kernel" -initrd "$tmp/net-initramfs.cpio" \
			-append 'console=ttyS0 reboot=t panic=-1 quiet rdinit=/init' \
			-netdev tap,id=n0,ifname=qtap0,script=no,downscript=no,vhost=off \
			-device virtio-net-device,netdev=n0 || failed="$failed qemufree"
	fi
	;;
esac
# For reference (not in the last line): our VMM's virtio-net on the same tap, no proxy, so
# the gap between ours and qemu splits into the device's share and the proxy's.
case " $legs " in *" direct "*)
	# SANDBOX_VMM: what sandboxctl runs (in the emulated host, the VMM pinned to one CPU).
	tap_guest direct timeout 600 "${SANDBOX_VMM:-$build/vmm/sandbox-vmm}" --kernel "$kernel" \
		--initrd "$tmp/net-initramfs.cpio" --memory 256 --timeout 590 --net tap=qtap0 \
		--cmdline 'console=ttyS0 reboot=k panic=-1 quiet rdinit=/init' ||
		failed="$failed direct"
	;;
esac

[ -z "$failed" ] || die "failed:$failed"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.3f\n", a / b }'; }
ms() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else printf "%.2f\n", a }'; }
echo "net host_MBps=${host_mbps:--} ours_MBps=${ours_mbps:--} qemu_MBps=${qemu_mbps:--} qemufree_MBps=${qemufree_mbps:--} qemufree_connect_ms=$(ms "${qemufree_ms:-}") direct_MBps=${direct_mbps:--} direct_connect_ms=$(ms "$direct_ms") ours_vs_qemu=$(ratio "$ours_mbps" "$qemu_mbps") connect_vs_qemu=$(ratio "$ours_ms" "$qemu_ms")"
echo "net throughput_ratio=$(ratio "$ours_mbps" "$host_mbps") qemu_ratio=$(ratio "$qemu_mbps" "$host_mbps") connect_ms=$(ms "$ours_ms") qemu_connect_ms=$(ms "$qemu_ms")"
