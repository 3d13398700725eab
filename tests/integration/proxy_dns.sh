#!/bin/sh
# tests/integration/proxy_dns.sh SANDBOX-PROXY FAKENET: what the sandbox's DNS lets leave
# (docs/network.md "Decisions"). `sandbox-proxy run --jail` in a network namespace made here,
# its resolver a fakenet dns on the host's loopback that logs every query it receives. A guest
# that asks for unique names under a zone (each would carry its bytes to the zone's
# nameserver):
#   1. past the rate: the resolver receives at most DNS_UPSTREAM_BURST (100) and
#      DNS_UPSTREAM_RATE (20) a second of them; the rest are answered REFUSED, and the audit
#      log counts every one as "deny (DNS rate limit)" (lines and summaries);
#   2. against an egress budget of 2000 bytes: each query is charged its size before it is
#      sent; once the budget cannot pay for one, no more reach the resolver (REFUSED, "deny
#      (egress budget exhausted)"), a CONNECT to a new name is refused (403) without a query,
#      and egress.left says what is left to the byte.
# Natively, in seconds. 77 (skipped) when not root or without iproute2.
set -u
proxy=$1
fakenet=$2
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (namespaces, setuid)"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "skipped: no ip (iproute2)"; exit 77; }
ip netns help 2>&1 | grep -q netns || { echo "skipped: this ip has no netns"; exit 77; }
# In a network namespace of its own, as proxy-jail: the host's ruleset may hold the proxies'
# kernel guard (docs/hardening.md), which refuses a proxy uid without a guard of its own
# everything; this test is not about the guard.
# shellcheck disable=SC1091 # beside this script, found at run time
. "$(dirname "$0")/check_lib.sh"
own_netns "$@"

uid=$((0x50000000 + 0x10000 + 0xd125)) # a proxy uid (SANDBOX_PROXY_UID_OFFSET), not proxy-jail's
vmm_gid=$((0x50000000 + 0xd125))
ns=pdns-$$
tmp=$(mktemp -d /tmp/proxy-dns.XXXXXX)
pid=
fail_show "$tmp/proxy.log" "$tmp/dns.err"
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	[ -f "$tmp/dns.pid" ] && kill "$(cat "$tmp/dns.pid")" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! { ip netns add "$ns" && ip -n "$ns" link set lo up &&
	ip -n "$ns" addr add 10.0.2.1/32 dev lo; }; then
	fail "cannot make namespace $ns"
fi
dport=$((20000 + $$ % 10000))
echo 'www.exfil.test A 203.0.113.10' >"$tmp/zone"
"$fakenet" dns --listen 127.0.0.1:$dport --zone "$tmp/zone" --pidfile "$tmp/dns.pid" \
	--log "$tmp/dns.log" 2>"$tmp/dns.err" &
for _ in $(seq 50); do [ -f "$tmp/dns.pid" ] && break; sleep 0.1; done
[ -f "$tmp/dns.pid" ] || fail "the fake resolver did not start"

# start_proxy NAME PREPARE-OPTION...: a sandbox directory $sb, prepared, and its jailed proxy
# ($pid) serving once it says ready.
start_proxy() {
	sb=$tmp/$1
	shift
	if ! { mkdir -m 1770 "$sb" && chown 0:$vmm_gid "$sb"; }; then
		fail "cannot make $sb"
	fi
	"$proxy" prepare "$sb" --deny-all --allow '*.exfil.test' --resolver 127.0.0.1:$dport "$@" ||
		fail "sandbox-proxy prepare $*"
	"$proxy" run "$sb" --netns /run/netns/$ns --jail uid=$uid,gid=$uid --ready-fd 3 \
		3>"$tmp/ready" 2>>"$tmp/proxy.log" &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$tmp/ready" 2>/dev/null && return; sleep 0.1; done
	fail "the proxy did not say ready"
}
stop_proxy() {
	kill -TERM "$pid"
	wait "$pid" || soft_fail "the proxy's exit status $? after SIGTERM"
	pid=
}
# audit_count PROTO RULE: the denials of PROTO with RULE in $sb's audit log, written whole or
# counted in a summary line (past 20 a second).
audit_count() {
	whole=$(grep -v '"decision":"summary"' "$sb/proxy/audit.log" |
		grep -c "\"proto\":\"$1\".*\"decision\":\"deny\",\"rule\":\"$2\"")
	counted=$(grep -o "\"proto\":\"$1\",\"decision\":\"deny\",\"rule\":\"$2\",\"count\":[0-9]*" \
		"$sb/proxy/audit.log" | awk -F: '{ n += $NF } END { print n + 0 }')
	echo $((whole + counted))
}
# ask FILE NAME...: each NAME's A query to the sandbox's DNS, from inside the namespace, one
# after the other; each answer's rcode line into FILE.
ask() {
	out=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	ip netns exec "$ns" sh -c 'f=$1; o=$2; shift 2; for n in "$@"; do
		"$f" query --connect 10.0.2.1:53 "$n" | grep "^rcode=" || echo "rcode=NONE"
	done >"$o"' ask "$fakenet" "$out" "$@"
}

# 1. The rate: 400 unique names as fast as the guest can ask.
start_proxy rate
names=$(seq 0 399 | sed 's/^/u/; s/$/.exfil.test/')
t0=$(date +%s.%N)
# shellcheck disable=SC2086 # the names are one word each, split on purpose
ask "$tmp/rate.out" $names
t1=$(date +%s.%N)
reached=$(grep -c '^u[0-9]*\.exfil\.test A$' "$tmp/dns.log")
refused=$(grep -c '^rcode=REFUSED$' "$tmp/rate.out")
nx=$(grep -c '^rcode=NXDOMAIN$' "$tmp/rate.out")
bound=$(awk -v a="$t0" -v b="$t1" 'BEGIN { s = b - a; print int(100 + 20 * (s + 1)) }')
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "rate: 400 unique names in $secs s: $reached reached the resolver (at most $bound), $refused refused"
[ "$reached" -le "$bound" ] || soft_fail "$reached queries reached the resolver in $secs s (at most $bound)"
[ "$reached" -ge 100 ] || soft_fail "only $reached queries reached the resolver (the burst is 100)"
[ "$nx" = "$reached" ] || soft_fail "$nx NXDOMAIN answers for $reached queries upstream"
[ $((nx + refused)) = 400 ] || soft_fail "answers: $nx NXDOMAIN, $refused REFUSED, of 400"
# A name already answered costs nothing upstream, with the bucket empty.
ask "$tmp/again.out" u0.exfil.test u1.exfil.test u2.exfil.test
[ "$(grep -c '^u[0-2]\.exfil\.test A$' "$tmp/dns.log")" = 3 ] ||
	soft_fail "a cached name was asked upstream again: $(grep -c '^u[0-2]\.exfil\.test A$' "$tmp/dns.log")"
grep -q '^rcode=NXDOMAIN$' "$tmp/again.out" || soft_fail "cached answers: $(cat "$tmp/again.out")"
kill -0 "$pid" 2>/dev/null || soft_fail "the proxy died: $(tail -3 "$tmp/proxy.log")"
stop_proxy # (the last second's summary is written at exit)
logged=$(audit_count dns 'deny (DNS rate limit)')
[ "$logged" = "$refused" ] || soft_fail "the audit log counts $logged rate-limit denials, the guest got $refused"

# 2. The budget: 2000 bytes; names of 197 bytes, a 215-byte query each (12 header, 199 name,
# 4 type and class): 9 are paid for, 65 bytes are left.
start_proxy budget --egress-bytes 2000
label=$(printf '%060d' 0 | tr 0 x)
names=$(seq 10 39 | sed "s/^/$label.$label.$label.b/; s/\$/.exfil.test/")
# shellcheck disable=SC2086 # as above
ask "$tmp/budget.out" $names
reached=$(grep -c '^x*\.x*\.x*\.b[0-9]*\.exfil\.test A$' "$tmp/dns.log")
refused=$(grep -c '^rcode=REFUSED$' "$tmp/budget.out")
echo "budget: 30 names of 215-byte queries against 2000 bytes: $reached reached the resolver, $refused refused"
[ "$reached" = 9 ] || soft_fail "$reached queries reached the resolver (2000 bytes pay for 9)"
[ "$refused" = 21 ] || soft_fail "$refused queries refused (21 past the budget)"
# A connection to a name not asked yet, whose query the 65 bytes left cannot pay for: refused
# as over budget, and nothing is asked.
new=$label.$label.$label.new.exfil.test
out=$(ip netns exec "$ns" "$fakenet" client --connect 10.0.2.1:3128 \
	--send "CONNECT $new:443 HTTP/1.1\\r\\nHost: $new:443\\r\\n\\r\\n")
echo "$out" | grep -q '^HTTP/1.1 403' || soft_fail "CONNECT to a new name over budget: $out"
grep -q 'new\.exfil\.test' "$tmp/dns.log" && soft_fail "the CONNECT's name was asked upstream over budget"
stop_proxy
logged=$(audit_count dns 'deny (egress budget exhausted)')
[ "$logged" = 21 ] || soft_fail "the audit log counts $logged budget denials of queries (21)"
[ "$(audit_count connect 'deny (egress budget exhausted)')" = 1 ] ||
	soft_fail "no denial of the CONNECT over budget in the audit log"
left=$(cat "$sb/proxy/egress.left" 2>&1)
[ "$left" = 65 ] || soft_fail "egress.left: $left (2000 - 9 x 215 = 65)"
checks_end "proxy DNS"
echo "ok: the sandbox's DNS queries upstream are rate-limited and charged to the egress budget"
