#!/bin/sh
# The guest's NIC end to end: a network namespace with a persistent tap (10.0.2.1/30), the
# real guest kernel booted with --net and sandbox.net=10.0.2.2/30,10.0.2.1, and frames both
# ways: the namespace pings the guest (its ARP request goes in, the guest's ARP reply and
# ICMP echo replies come out).
#
# usage: net_boot.sh VMM KERNEL INITRD
#        net_boot.sh --inner VMM KERNEL INITRD   (the test proper, where Linux boots)
#
# Where a Linux guest boots (route.sh: natively on hardware KVM, else in the emulated KVM
# host). A failing run shows the guest's console.
set -u
here=$(cd "$(dirname "$0")" && pwd)

if [ "${1:-}" != --inner ]; then
	vmm=$1 kernel=$2 initrd=$3
	[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
	build=$(cd "$(dirname "$vmm")/.." && pwd)
	exec "$here/route.sh" "$build" --linux --add "$here" -- \
		"$here/net_boot.sh" --inner "$vmm" "$kernel" "$initrd"
fi

# ---- the test proper ----
vmm=$2 kernel=$3 initrd=$4
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace and a tap)"; exit 77; }
[ -e /dev/net/tun ] || { echo "SKIP: no /dev/net/tun"; exit 77; }
# iproute2's ip by its path: busybox sh runs its own applet for a bare "ip", and busybox's ip
# has no netns.
ip_cmd=
for c in /usr/sbin/ip /usr/bin/ip /sbin/ip /bin/ip; do
	if [ -x "$c" ] && "$c" -V 2>&1 | grep -q iproute2; then
		ip_cmd=$c
		break
	fi
done
[ -n "$ip_cmd" ] || { echo "SKIP: no iproute2 ip here (busybox's has no netns)"; exit 77; }
ip() { "$ip_cmd" "$@"; }
ns=sbx-nettest-$$
work=$(mktemp -d)
console=$work/console
vmm_pid=
cleanup() {
	[ -n "$vmm_pid" ] && kill "$vmm_pid" 2>/dev/null && wait "$vmm_pid" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
. "$here/check_lib.sh"
fail_show "$console" "$work/vmm.err"

ip netns add "$ns" || fail "ip netns add $ns"
ip -n "$ns" link set lo up
ip -n "$ns" tuntap add dev tap0 mode tap || fail "cannot make a persistent tap in $ns"
ip -n "$ns" link set tap0 address 02:53:42:00:00:01
ip -n "$ns" addr add 10.0.2.1/30 dev tap0 || fail "cannot give tap0 its address"
ip -n "$ns" link set tap0 up || fail "cannot bring tap0 up"

# The guest stays up (sandbox.reboot=0: init waits for an agent it has no vsock for).
cmdline='console=ttyS0 reboot=k panic=-1 quiet sandbox.reboot=0 sandbox.net=10.0.2.2/30,10.0.2.1'
"$vmm" --kernel "$kernel" --initrd "$initrd" --cmdline "$cmdline" --timeout 80 \
	--net "tap=tap0,netns=/run/netns/$ns,mac=02:53:42:00:00:02" \
	--console "$console" 2>"$work/vmm.err" &
vmm_pid=$!

# Up to 60 s for the banner (the emulated host is slow, and busy machines slower).
i=0
until grep -q 'sandbox-init: ready uptime_ms=' "$console" 2>/dev/null; do
	kill -0 "$vmm_pid" 2>/dev/null || fail "the VMM exited before the guest's banner"
	i=$((i + 1))
	[ "$i" -le 600 ] || fail "no banner within 60 s"
	sleep 0.1
done
grep -q 'net:' "$console" && fail "sandbox-init could not configure eth0"
# The VMM is still in its own namespace: the tap is not visible from here.
ip link show tap0 >/dev/null 2>&1 && fail "tap0 is visible outside $ns"

# The first echo may wait for ARP; 5 tries, at least 3 answers.
out=$(ip netns exec "$ns" ping -c 5 -W 2 10.0.2.2 2>&1)
echo "$out"
received=$(echo "$out" | sed -n 's/.* \([0-9][0-9]*\) packets received.*/\1/p')
[ "${received:-0}" -ge 3 ] || fail "the guest answered ${received:-0} of 5 pings from the namespace"
# Larger than the MTU: IP fragments back to back each way.
ip netns exec "$ns" ping -c 2 -W 3 -s 8000 10.0.2.2 >"$work/bigping" 2>&1 ||
	{ cat "$work/bigping"; fail "no answer to 8000-byte pings (fragmented)"; }
ip -n "$ns" neigh show dev tap0 | grep -qi '02:53:42:00:00:02' ||
	fail "the namespace did not learn the guest's MAC from its ARP reply"
ip -n "$ns" -s link show tap0
echo "net: the guest answered $received pings through its NIC"
kill "$vmm_pid"
wait "$vmm_pid"
st=$?
vmm_pid=
# 7: stopped by our signal, as asked.
[ "$st" = 7 ] || fail "the VMM exited with status $st after SIGTERM, not 7"
grep -E 'virtio-net|NEEDS|needs reset' "$work/vmm.err" && fail "the VMM complained about the NIC"
echo "PASS: linux-net"
exit 0
