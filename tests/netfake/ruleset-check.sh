#!/bin/sh
# tests/netfake/ruleset-check.sh [RULESET]: does the sandbox namespace's ruleset load here?
#
# Makes a scratch namespace with a persistent tap0 (as client/net.c does), loads RULESET
# (default: ruleset-example.nft beside this script, the ruleset of docs/network.md) with
# `nft -f`, prints `nft list ruleset`, then tries each further rule form client/net.c might
# want, one at a time in a table of its own, and prints "form ok|FAIL: <what>" for each,
# and the nf/nft modules loaded afterwards. Exit 0 if RULESET loaded, 1 if not, 77 if this
# is not root or has no ip/nft. Runs on the host or in the emulated KVM host:
#   tools/devhost/run --add "$PWD/tests/netfake" -- sh tests/netfake/ruleset-check.sh
# Nothing outside the scratch namespace is touched; it is deleted on exit.
set -u
# In the emulated host sh is busybox's (static, applets before PATH): its own ip applet has no
# netns. iproute2's is /usr/bin/ip there as here.
[ -x /usr/bin/ip ] && ip() { /usr/bin/ip "$@"; }
here=$(cd "$(dirname "$0")" && pwd)
ruleset=${1:-$here/ruleset-example.nft}
[ "$(id -u)" = 0 ] || { echo "ruleset-check: skipped: not root"; exit 77; }
for t in ip nft; do
	command -v $t >/dev/null 2>&1 || { echo "ruleset-check: skipped: no $t"; exit 77; }
done
ns=rscheck$$
trap 'ip netns del $ns 2>/dev/null' EXIT INT TERM
ip netns add $ns || exit 1
ip -n $ns link set lo up
ip -n $ns tuntap add dev tap0 mode tap vnet_hdr || exit 1
ip -n $ns addr add 10.0.2.1/30 dev tap0
ip -n $ns link set tap0 address 02:53:42:00:00:01 up

rc=0
if ip netns exec $ns nft -f "$ruleset"; then
	echo "ruleset $ruleset: ok"
	ip netns exec $ns nft list ruleset
else
	echo "ruleset $ruleset: FAIL"
	rc=1
fi

# form FAMILY CHAIN-SPEC RULE: one rule in a fresh table "t" with one chain "c".
form() {
	if out=$(printf 'table %s t {\n chain c {\n %s\n %s\n }\n}\n' "$1" "$2" "$3" |
		ip netns exec $ns nft -f - 2>&1); then
		echo "form ok: $1: $3"
	else
		echo "form FAIL: $1: $3: $(echo "$out" | head -1)"
	fi
	ip netns exec $ns nft delete table "$1" t 2>/dev/null
}
ing='type filter hook ingress device "tap0" priority -500; policy accept;'
egr='type filter hook egress device "tap0" priority 0; policy accept;'
inp='type filter hook input priority filter; policy accept;'
outp='type filter hook output priority filter; policy accept;'
pre='type nat hook prerouting priority dstnat; policy accept;'
post='type nat hook postrouting priority srcnat; policy accept;'
tpr='type filter hook prerouting priority mangle; policy accept;'
form netdev "$ing" 'ether type != { arp, ip } drop'
form netdev "$ing" 'meta protocol ip6 drop'
form netdev "$ing" 'ether saddr != 02:53:42:00:00:02 counter drop'
form netdev "$ing" 'ether type arp arp operation { request, reply } accept'
form netdev "$ing" 'ip protocol udp udp dport != 53 drop'
form netdev "$ing" 'fib daddr type local accept'
form netdev "$ing" 'reject'
form netdev "$ing" 'limit rate over 1000/second drop'
form netdev "$ing" 'log prefix "sbx-drop " drop'
form netdev "$egr" 'ether daddr != 02:53:42:00:00:02 drop'
form ip "$pre" 'iifname "tap0" tcp dport != 3128 redirect to :15001'
form ip "$pre" 'iifname "tap0" meta l4proto tcp dnat to 10.0.2.1:15001'
form ip "$pre" 'iifname "tap0" udp dport 53 dnat to 10.0.2.1:53'
form ip "$pre" 'fib daddr type local accept'
form ip "$post" 'oifname "tap0" masquerade'
form ip "$tpr" 'iifname "tap0" meta l4proto tcp tproxy to :15001 meta mark set 1 accept'
form ip "$inp" 'ct state invalid drop'
form ip "$inp" 'meta l4proto tcp reject with tcp reset'
form ip "$inp" 'reject with icmp type admin-prohibited'
form ip "$inp" 'reject with icmp type port-unreachable'
form ip "$inp" 'ct count over 512 reject'
form ip "$inp" 'tcp flags syn limit rate over 100/second drop'
form ip "$inp" 'ct status dnat accept'
form ip "$inp" 'quota over 100 mbytes drop'
form ip "$inp" 'counter accept'
form ip "$outp" 'oifname "tap0" ip daddr 10.0.2.2 tcp dport { 8000, 8080 } ct state new accept'
form inet "$inp" 'meta nfproto ipv6 drop'
form inet "$inp" 'meta l4proto udp reject'

echo "modules: $(grep -E "^(nf|nft|nfnetlink)" /proc/modules 2>/dev/null | cut -d" " -f1 | sort | tr "\n" " ")"
exit $rc
