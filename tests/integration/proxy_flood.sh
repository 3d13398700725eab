#!/bin/sh
# tests/integration/proxy_flood.sh SANDBOX-PROXY FAKENET CLIENT_H PROXY_H: a guest's floods of
# connections against `sandbox-proxy run --jail` (docs/network.md "Decisions"), natively.
#
# The proxy runs jailed (its RLIMIT_NPROC and NOFILE) in a pids cgroup sized as sandboxctl
# sizes a sandbox of one vCPU (client/cgroup.c: CLIENT_H's CGROUP_PIDS_BASE + 1 +
# CGROUP_PIDS_PROXY), its listeners in a network namespace made here whose output chain
# sends TCP to the synthetic addresses on port 80 to the transparent listener (as the
# guest's is), its upstream an HTTP server that counts its connections and its resolver, both
# in a second namespace behind a veth pair (10.254.N.2, allowed by --allow-cidr: never the
# host's loopback). In a network namespace of its own, so that no nftables guard of the
# kernel's (sandbox-proxy guard) applies to it, whoever else runs here.
#
#   1. 2000 connections that never send a byte: meanwhile a normal request is answered
#      within 1 s; the upstream sees no connection for them; each is closed within 30 s of
#      its opening; the audit log counts a refusal for each (deny lines, or summary counts).
#   2. 200 plain-HTTP connections at once held open by slow clients (a relay of two threads
#      each): every one answered or refused with a line, a new request answered afterwards,
#      and the cgroup's pids.current never above the proxy's share (the VMM's left free).
#   3. 200 connections sending their heads a byte a write: refused after CONN_TAKES_MAX
#      reads, with their line; a normal request answered within 1 s meanwhile.
# Also: CLIENT_H's CGROUP_PIDS_PROXY is PROXY_H's PROXY_THREADS_MAX.
#
# Exit 0 when all hold, 1 on a failure, 77 (skipped) when not root or without iproute2, nft,
# python3 or a pids cgroup controller.
set -u
proxy=$1
fakenet=$2
client_h=$3
proxy_h=$4
here=$(dirname "$0")
py=$here/proxy_flood.py
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (namespaces, setuid, cgroups)"; exit 77; }
for c in ip nft python3; do
	command -v $c >/dev/null 2>&1 || { echo "skipped: no $c"; exit 77; }
done
ip netns help 2>&1 | grep -q netns || { echo "skipped: this ip has no netns"; exit 77; }
# In a network namespace of its own, as proxy-jail: the host's ruleset may hold the proxies'
# kernel guard (docs/hardening.md), which refuses a proxy uid without a guard of its own
# everything; this test is not about the guard.
. "$(dirname "$0")/check_lib.sh"
own_netns "$@"

# A proxy uid of its own (RLIMIT_NPROC counts per uid), not another test's.
uid=$((0x50000000 + 0x10000 + 0xbef1))
vmm_gid=$((0x50000000 + 0xbef1))
ns=pflood-$$
up=pfup-$$
vh=pfh$$
vu=pfu$$
o=$(($$ % 250 + 1))
upaddr=10.254.$o.2
tmp=$(mktemp -d /tmp/proxy-flood.XXXXXX)
sb=$tmp/bef10000
pid=
cg=
fail_show "$tmp/proxy.log" "$tmp/upstream.log" "$tmp/dns.log" "$tmp/query.log"
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	# the jailed proxy (its own pid namespace's first) is in the cgroup: gone with it
	if [ -n "$cg" ] && [ -f "$cg/cgroup.procs" ]; then
		for p in $(cat "$cg/cgroup.procs"); do kill -9 "$p" 2>/dev/null; done
	fi
	for p in upstream dns; do
		[ -f "$tmp/$p.pid" ] && kill "$(cat "$tmp/$p.pid")" 2>/dev/null
	done
	ip netns del "$ns" 2>/dev/null
	ip netns del "$up" 2>/dev/null
	ip link del "$vh" 2>/dev/null
	if [ -n "$cg" ]; then
		for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# The numbers sandboxctl sizes the cgroup with, and the proxy's own budget.
define() { sed -n "s/^#define $1[[:space:]]*\\([0-9][0-9]*\\)u\\{0,1\\}\\([[:space:]].*\\)\\{0,1\\}\$/\\1/p" "$2"; }
base=$(define CGROUP_PIDS_BASE "$client_h")
share=$(define CGROUP_PIDS_PROXY "$client_h")
budget=$(define PROXY_THREADS_MAX "$proxy_h")
[ -n "$base" ] || fail "no CGROUP_PIDS_BASE in $client_h"
[ -n "$share" ] || soft_fail "no CGROUP_PIDS_PROXY in $client_h: the proxy has no share of pids.max"
[ -n "$share" ] && [ "$share" = "$budget" ] ||
	soft_fail "CGROUP_PIDS_PROXY ${share:-none} is not PROXY_THREADS_MAX ${budget:-none}"
share=${share:-0}
pids_max=$((base + 1 + share))

# A pids cgroup of its own: v1's hierarchy, else a v2 child of the root with pids.
if [ -d /sys/fs/cgroup/pids ] && [ -f /sys/fs/cgroup/pids/cgroup.procs ]; then
	cg=/sys/fs/cgroup/pids/proxy-flood-$$
elif grep -qw pids /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
	cg=/sys/fs/cgroup/proxy-flood-$$
else
	echo "skipped: no pids cgroup controller"
	exit 77
fi
mkdir "$cg" && echo "$pids_max" >"$cg/pids.max" || fail "cannot make the pids cgroup $cg"

# The upstream side: a namespace behind a veth pair, with the counting server and a resolver.
ip netns add "$ns" && ip -n "$ns" link set lo up && ip -n "$ns" addr add 10.0.2.1/32 dev lo &&
	ip -n "$ns" route add local 10.0.128.0/17 dev lo || fail "cannot make namespace $ns"
ip netns add "$up" && ip -n "$up" link set lo up &&
	ip link add "$vh" type veth peer name "$vu" && ip link set "$vu" netns "$up" &&
	ip addr add "10.254.$o.1/30" dev "$vh" && ip link set "$vh" up &&
	ip -n "$up" addr add "$upaddr/30" dev "$vu" && ip -n "$up" link set "$vu" up ||
	fail "cannot make the upstream namespace $up"
# The guest's TCP to a synthetic address's port 80 goes to the transparent listener, as the
# sandbox's chain sends it (SO_ORIGINAL_DST: the address dialed).
ip netns exec "$ns" nft -f - <<EOF || fail "cannot add the redirect in $ns"
table ip pflood {
	chain out {
		type nat hook output priority -100; policy accept;
		ip daddr 10.0.128.0/17 tcp dport 80 dnat to 10.0.2.1:15001
	}
}
EOF
echo "up.test A $upaddr" >"$tmp/zone"
ip netns exec "$up" "$fakenet" dns --listen "$upaddr:53" --zone "$tmp/zone" \
	--pidfile "$tmp/dns.pid" >"$tmp/dns.log" 2>&1 &
ip netns exec "$up" python3 "$py" upstream "$upaddr" 80 "$tmp/count" >"$tmp/upstream.log" 2>&1 &
echo $! >"$tmp/upstream.pid"
mkdir -m 1770 "$sb" && chown 0:$vmm_gid "$sb"
"$proxy" prepare "$sb" --deny-all --allow up.test --allow-cidr "$upaddr/32" \
	--resolver "$upaddr:53" || fail "sandbox-proxy prepare"
# Jailed, in the cgroup from its first instruction (as sandboxctl's clone puts it).
# shellcheck disable=SC2016 # $$ and $0 are the inner shell's
sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$proxy" run "$sb" \
	--netns "/run/netns/$ns" --jail "uid=$uid,gid=$uid" 2>"$tmp/proxy.log" &
pid=$!
synth=
for _ in $(seq 100); do
	synth=$(ip netns exec "$ns" "$fakenet" query --connect 10.0.2.1:53 up.test 2>>"$tmp/query.log" |
		sed -n 's/^A \(10\.0\.[0-9.]*\)$/\1/p')
	[ -n "$synth" ] && [ -s "$tmp/count" ] && break
	sleep 0.2
done
[ -n "$synth" ] || fail "no synthetic address for up.test from the proxy (in cgroup: $(cat "$cg/cgroup.procs" | tr '\n' ' '))"
out=$(ip netns exec "$ns" python3 "$py" relays "$synth" 80 1 up.test 0)
echo "$out" | grep -q '^answered 1$' || fail "a request through the proxy: $out"
count0=$(cat "$tmp/count")
echo "ok: the jailed proxy in $cg (pids.max $pids_max) relays to $upaddr as up.test ($synth)"

# 1. 2000 silent connections, a normal request among them.
from=$(wc -l <"$sb/proxy/audit.log")
out=$(ip netns exec "$ns" python3 "$py" silent "$synth" 80 2000 up.test)
val() { echo "$out" | sed -n "s/^$1 //p"; }
echo "$out" | sed 's/^/    /'
[ "$(val normal_status)" = HTTP/1.1_200_OK ] ||
	soft_fail "the normal request amid 2000 silent connections: $(val normal_status)"
[ "$(val normal_ms)" -lt 1000 ] || soft_fail "the normal request took $(val normal_ms) ms"
[ "$(val closed)" = 2000 ] || soft_fail "$(val closed) of 2000 silent connections closed in 40 s"
awk -v m="$(val max_close_s)" 'BEGIN { exit !(m <= 30) }' ||
	soft_fail "a silent connection stayed open $(val max_close_s) s"
sleep 1
count1=$(cat "$tmp/count")
[ "$count1" = $((count0 + 1)) ] ||
	soft_fail "the upstream saw $((count1 - count0)) connections, the normal request's only: 1"
sleep 2 # the last second's summary
refused=$(python3 "$py" refusals "$sb/proxy/audit.log" "$from" | sed -n 's/^deny //p')
[ "$refused" -ge 2000 ] || soft_fail "the audit log counts $refused refusals of 2000 silent ones"
echo "measured: 2000 silent connections: normal request in $(val normal_ms) ms, all closed within" \
	"$(val max_close_s) s, $((count1 - count0)) upstream connection, $refused refusals logged"

# 2. 200 plain-HTTP relays at once, held open, pids.current watched meanwhile.
from=$(wc -l <"$sb/proxy/audit.log")
ip netns exec "$ns" python3 "$py" relays "$synth" 80 200 up.test 5 >"$tmp/relays" 2>&1 &
client=$!
peak=0
while kill -0 "$client" 2>/dev/null; do
	n=$(cat "$cg/pids.current")
	[ "$n" -gt "$peak" ] && peak=$n
	sleep 0.1
done
wait "$client"
out=$(cat "$tmp/relays")
echo "$out" | sed 's/^/    /'
answered=$(val answered)
norefused=$(val refused)
lines=$(python3 "$py" refusals "$sb/proxy/audit.log" "$from" | awk '{ n += $2 } END { print n }')
[ $((answered + norefused)) = 200 ] || soft_fail "200 relays: $answered answered, $norefused not"
[ "$norefused" -le "$lines" ] ||
	soft_fail "$norefused relays refused, $lines refusal or error lines in the audit log"
[ "$(val after_status)" = HTTP/1.1_200_OK ] ||
	soft_fail "a request after the 200 relays: $(val after_status)"
[ "$peak" -le "$share" ] && [ "$peak" -le $((pids_max - base - 1)) ] ||
	soft_fail "pids.current reached $peak: over the proxy's share $share of $pids_max"
[ "$peak" -ge 200 ] || soft_fail "pids.current peaked at $peak: the 200 relays' threads not seen"
kill -0 "$pid" 2>/dev/null || soft_fail "the proxy died: $(tail -3 "$tmp/proxy.log")"
echo "measured: 200 relays at once: $answered answered, $norefused refused ($lines lines)," \
	"pids.current at most $peak (the proxy's share $share of $pids_max)"

# 3. 200 connections dribbling their heads a byte a write: refused after CONN_TAKES_MAX reads
# (the waiting room would sniff each growing head again at every byte), a normal request
# answered meanwhile.
from=$(wc -l <"$sb/proxy/audit.log")
out=$(ip netns exec "$ns" python3 "$py" dribble "$synth" 80 200 up.test)
echo "$out" | sed 's/^/    /'
[ "$(val refused)" = 200 ] || soft_fail "$(val refused) of 200 dribbling connections refused"
[ "$(val normal_status)" = HTTP/1.1_200_OK ] ||
	soft_fail "the normal request amid 200 dribbling connections: $(val normal_status)"
[ "$(val normal_ms)" -lt 1000 ] || soft_fail "the normal request took $(val normal_ms) ms"
sleep 2 # the last second's summary
grep -q 'first bytes in more than 64 reads' "$sb/proxy/audit.log" ||
	soft_fail "no 'first bytes in more than 64 reads' refusal in the audit log"
echo "measured: 200 dribbling connections: $(val refused) refused, normal request in" \
	"$(val normal_ms) ms"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[ $rc = 0 ] || soft_fail "exit status $rc after SIGTERM"
checks_end "proxy flood"
echo "ok: the proxy under floods of silent and plain-HTTP connections"
