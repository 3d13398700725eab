#!/bin/sh
# tests/integration/proxy_jail.sh SANDBOX-PROXY FAKENET: `sandbox-proxy run --jail` started
# directly in a network namespace made here (docs/hardening.md "The proxy's jail"). The
# running proxy, as /proc shows it, is filtered (Seccomp 2), unprivileged (NoNewPrivs 1, no
# capability, its own uid), in pid, mount, ipc and uts namespaces of its own but the host's
# network namespace, with DIR/proxy as its root and its limits; and under its filter it still
# answers DNS, refuses and relays connections (a thread each), rotates and writes its audit
# log, dns.map and egress.left as its uid, and ends with 0 on SIGTERM. Then `forward --jail`
# (sandboxctl port): the same jail in the sandbox's network namespace with an empty root,
# relaying a connection from the host's loopback to the guest's address. 77 (skipped) when
# not root or without iproute2.
#
# The test runs in a network namespace of its own (it re-runs itself under unshare -n): the
# "host's" namespace of the proxy, where the kernel's guard of its uid is loaded as sandboxctl
# loads it (sandbox-proxy guard, nft; proxy-guard tests the guard itself), never the host's
# ruleset, where a proxy uid without a guard of its own is refused everything.
set -u
proxy=$1
fakenet=$2
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (namespaces, setuid)"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "skipped: no ip (iproute2)"; exit 77; }
ip netns help 2>&1 | grep -q netns || { echo "skipped: this ip has no netns"; exit 77; }
. "$(dirname "$0")/check_lib.sh"
own_netns "$@"

uid=$((0x50000000 + 0x10000 + 0xbeef)) # a proxy uid (SANDBOX_PROXY_UID_OFFSET)
vmm_gid=$((0x50000000 + 0xbeef))
ns=pjail-$$
tmp=$(mktemp -d /tmp/proxy-jail.XXXXXX)
sb=$tmp/beef0000
pid=
fail_show "$tmp/forward.log" "$tmp/proxy.log"
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	[ -f "$tmp/http.pid" ] && kill "$(cat "$tmp/http.pid")" 2>/dev/null
	[ -f "$tmp/dns.pid" ] && kill "$(cat "$tmp/dns.pid")" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# jailed_child LOG WHAT: $child, the filtered child of $pid (started by hand, the program
# forks into its pid namespace), within 10 s; else LOG and "FAIL: WHAT", and the test ends.
jailed_child() {
	child=
	for _ in $(seq 100); do
		child=$(cat /proc/$pid/task/$pid/children 2>/dev/null | tr -d ' ')
		[ -n "$child" ] && grep -q '^Seccomp:[[:space:]]*2' /proc/$child/status 2>/dev/null && break
		sleep 0.1
	done
	[ -n "$child" ] || { cat "$1"; fail "$2"; }
}

# The sandbox's namespace with the gateway address, a resolver and a web server on the
# "host's" loopback (the proxy's upstream side, allowed by the policy's allow-cidr).
ip netns add "$ns" && ip -n "$ns" link set lo up && ip -n "$ns" addr add 10.0.2.1/32 dev lo ||
	fail "cannot make namespace $ns"
dport=$((20000 + $$ % 10000))
hport=$((dport + 1))
echo 'allowed.test A 127.0.0.1' >"$tmp/zone"
"$fakenet" dns --listen 127.0.0.1:$dport --zone "$tmp/zone" --pidfile "$tmp/dns.pid" &
"$fakenet" http --listen 127.0.0.1:$hport --pidfile "$tmp/http.pid" &
mkdir -m 1770 "$sb" && chown 0:$vmm_gid "$sb"
"$proxy" prepare "$sb" --deny-all --allow allowed.test --allow-cidr 127.0.0.1/32 \
	--allow-port $hport --resolver 127.0.0.1:$dport --egress-bytes 10000000 ||
	fail "sandbox-proxy prepare"
# Its guard, as sandboxctl loads it: the resolver and the web server (allow-cidr) reached.
if command -v nft >/dev/null 2>&1; then
	"$proxy" guard "$sb" --uid $uid --uids 1342242816-1342308351 >"$tmp/guard.nft" &&
		nft -f "$tmp/guard.nft" || fail "cannot load the proxy's guard"
else
	echo "note: no nft: the proxy runs without its guard"
fi

# Its directory is refused when it is a link (the VMM's group may write the sandbox's).
ln -s /tmp "$sb/proxy"
if "$proxy" run "$sb" --netns /run/netns/$ns --jail uid=$uid,gid=$uid 2>"$tmp/err"; then
	soft_fail "run accepted DIR/proxy as a link"
fi
grep -q "$sb/proxy" "$tmp/err" || soft_fail "no message naming DIR/proxy: $(cat "$tmp/err")"
rm "$sb/proxy"
for bad in uid=0,gid=$uid uid=$uid uid=-1,gid=1 "uid= 5,gid=5"; do
	"$proxy" run "$sb" --netns /run/netns/$ns --jail "$bad" 2>/dev/null
	[ $? = 2 ] || soft_fail "--jail $bad not refused as usage"
done

# An audit log at its rotation size: the first line, jailed, renames it and starts another.
mkdir -m 700 "$sb/proxy" && truncate -s 32M "$sb/proxy/audit.log" && chmod 600 "$sb/proxy/audit.log"
# fd 7 is inherited, not given: it is closed.
"$proxy" run "$sb" --netns /run/netns/$ns --jail uid=$uid,gid=$uid 2>"$tmp/proxy.log" \
	7>"$tmp/inherited" &
pid=$!
# Started by hand, it forks into a pid namespace: the jailed proxy is the child.
jailed_child "$tmp/proxy.log" "no jailed proxy"
sleep 0.5
st=/proc/$child/status
field() { awk -v k="$1:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$st"; }
[ "$(field Seccomp)" = 2 ] || soft_fail "Seccomp: $(field Seccomp)"
[ "$(field NoNewPrivs)" = 1 ] || soft_fail "NoNewPrivs: $(field NoNewPrivs)"
for c in CapEff CapPrm CapInh CapBnd CapAmb; do
	[ "$(field $c)" = 0000000000000000 ] || soft_fail "$c: $(field $c)"
done
[ "$(field Uid)" = "$uid $uid $uid $uid" ] || soft_fail "Uid: $(field Uid)"
[ "$(field Gid)" = "$uid $uid $uid $uid" ] || soft_fail "Gid: $(field Gid)"
[ -z "$(field Groups)" ] || soft_fail "Groups: $(field Groups)"
[ "$(field NSpid | awk '{print $NF}')" = 1 ] || soft_fail "not PID 1 of its namespace: $(field NSpid)"
for n in mnt ipc uts pid; do
	[ "$(readlink /proc/$child/ns/$n)" != "$(readlink /proc/self/ns/$n)" ] ||
		soft_fail "the host's $n namespace"
done
[ "$(readlink /proc/$child/ns/net)" = "$(readlink /proc/self/ns/net)" ] ||
	soft_fail "not the host's network namespace"
[ "$(ls -a /proc/$child/root | sort)" = "$(ls -a "$sb/proxy" | sort)" ] ||
	soft_fail "its root is not DIR/proxy: $(ls /proc/$child/root)"
[ ! -e /proc/$child/root/etc ] || soft_fail "the host's /etc is in its root"
lim() { awk -v k="$1" 'index($0, k) == 1 { print $(NF - 2) }' /proc/$child/limits; }
[ "$(lim 'Max core file size')" = 0 ] || soft_fail "core limit $(lim 'Max core file size')"
[ "$(lim 'Max open files')" = 3152 ] || soft_fail "open files $(lim 'Max open files')"
[ "$(lim 'Max processes')" = 1048 ] || soft_fail "processes $(lim 'Max processes')"
[ "$(lim 'Max file size')" = $((65 << 20)) ] || soft_fail "file size $(lim 'Max file size')"
for f in /proc/$child/fd/*; do
	[ "$(readlink "$f")" != "$tmp/inherited" ] || soft_fail "an inherited fd is still open ($f)"
done
[ -e /proc/$child/fd/2 ] || soft_fail "stderr was closed"
# The waiting parent is as confined.
grep -q '^Seccomp:[[:space:]]*2' /proc/$pid/status || soft_fail "the waiting parent is unfiltered"
grep -q "^Uid:[[:space:]]*$uid" /proc/$pid/status || soft_fail "the waiting parent keeps root"
[ "$(stat -c '%u %a' "$sb/proxy")" = "$uid 700" ] || soft_fail "DIR/proxy: $(stat -c '%u %a' "$sb/proxy")"

# Under the filter: DNS (a worker thread each, the resolver upstream), a refused CONNECT and
# a relayed HTTP request (a thread each, an upstream socket, splice).
out=$(ip netns exec "$ns" "$fakenet" query --connect 10.0.2.1:53 allowed.test)
echo "$out" | grep -q '^A 10\.0\.' || soft_fail "DNS through the jailed proxy: $out"
out=$(ip netns exec "$ns" "$fakenet" query --connect 10.0.2.1:53 other.test)
echo "$out" | grep -q 'rcode=' || soft_fail "DNS of a denied name: $out"
out=$(ip netns exec "$ns" "$fakenet" client --connect 10.0.2.1:3128 \
	--send 'CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n')
echo "$out" | grep -q '^HTTP/1.1 403' || soft_fail "CONNECT denied.test: $out"
out=$(ip netns exec "$ns" "$fakenet" client --connect 10.0.2.1:3128 \
	--send "GET http://127.0.0.1:$hport/echo HTTP/1.1\r\nHost: 127.0.0.1:$hport\r\nConnection: close\r\n\r\n")
echo "$out" | grep -q '^HTTP/1.1 200' || soft_fail "GET through the jailed proxy: $out"
sleep 6 # the budget is saved every 5 s
kill -0 "$child" 2>/dev/null || soft_fail "the jailed proxy died: $(tail -3 "$tmp/proxy.log")"
grep -q '"name":"denied.test".*"decision":"deny"' "$sb/proxy/audit.log" ||
	soft_fail "the audit log lacks denied.test"
grep -q "\"addr\":\"127.0.0.1\".*\"port\":$hport" "$sb/proxy/audit.log" ||
	soft_fail "the audit log lacks the relayed request"
grep -q allowed.test "$sb/proxy/dns.map" || soft_fail "dns.map lacks allowed.test"
[ -f "$sb/proxy/egress.left" ] && [ "$(cat "$sb/proxy/egress.left")" -lt 10000000 ] ||
	soft_fail "egress.left: $(cat "$sb/proxy/egress.left" 2>&1)"
[ "$(stat -c %s "$sb/proxy/audit.log.1" 2>&1)" = $((32 << 20)) ] ||
	soft_fail "audit.log not rotated to audit.log.1: $(ls -l "$sb/proxy")"
[ "$(stat -c %u "$sb/proxy/audit.log")" = "$uid" ] || soft_fail "the new audit.log is not the proxy's"
# Opened before the jail (root's) or made in it (the proxy's), 0600: never the VMM's.
for f in audit.log audit.log.1 dns.map egress.left; do
	case $(stat -c '%u %a' "$sb/proxy/$f") in
	"0 600" | "$uid 600") ;;
	*) soft_fail "$f: $(stat -c '%u %a' "$sb/proxy/$f")" ;;
	esac
done
[ "$(stat -c %u "$sb/proxy/egress.left")" = "$uid" ] || soft_fail "egress.left not written jailed"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[ $rc = 0 ] || soft_fail "exit status $rc after SIGTERM (159: killed by its filter)"

# `forward --jail` (sandboxctl port): listening on the host's loopback, in the sandbox's
# network namespace, the same jail with an empty read-only root; a connection relayed to
# the guest's address under its filter, and SIGTERM ends it.
ip -n "$ns" addr add 10.0.2.2/32 dev lo || soft_fail "cannot add the guest's address"
gport=$((hport + 1))
fport=$((hport + 2))
ip netns exec "$ns" "$fakenet" http --listen 10.0.2.2:$gport --pidfile "$tmp/ghttp.pid" &
"$proxy" forward --netns /run/netns/$ns --listen 127.0.0.1:$fport --to 10.0.2.2:$gport \
	--jail uid=$uid,gid=$uid 2>"$tmp/forward.log" &
pid=$!
jailed_child "$tmp/forward.log" "no jailed forwarder"
st=/proc/$child/status
[ "$(field Seccomp)" = 2 ] || soft_fail "forward: Seccomp: $(field Seccomp)"
[ "$(field NoNewPrivs)" = 1 ] || soft_fail "forward: NoNewPrivs: $(field NoNewPrivs)"
[ "$(field CapEff)" = 0000000000000000 ] || soft_fail "forward: CapEff: $(field CapEff)"
[ "$(field Uid)" = "$uid $uid $uid $uid" ] || soft_fail "forward: Uid: $(field Uid)"
[ "$(field NSpid | awk '{print $NF}')" = 1 ] || soft_fail "forward: not PID 1: $(field NSpid)"
[ "$(readlink /proc/$child/ns/net)" = "$(ip netns exec "$ns" readlink /proc/self/ns/net)" ] ||
	soft_fail "forward: not in the sandbox's network namespace"
[ -z "$(ls -A /proc/$child/root)" ] || soft_fail "forward: its root is not empty: $(ls /proc/$child/root)"
for n in mnt ipc uts pid; do
	[ "$(readlink /proc/$child/ns/$n)" != "$(readlink /proc/self/ns/$n)" ] ||
		soft_fail "forward: the host's $n namespace"
done
for _ in $(seq 50); do [ -f "$tmp/ghttp.pid" ] && break; sleep 0.1; done
out=$("$fakenet" client --connect 127.0.0.1:$fport \
	--send "GET /echo HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n")
echo "$out" | grep -q '^HTTP/1.1 200' || soft_fail "forward: GET to the guest's port: $out"
kill -0 "$child" 2>/dev/null || soft_fail "forward: the jailed forwarder died: $(cat "$tmp/forward.log")"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[ $rc = 0 ] || soft_fail "forward: exit status $rc after SIGTERM (159: killed by its filter)"
kill "$(cat "$tmp/ghttp.pid")" 2>/dev/null
checks_end "jailed proxy"
echo "ok: the jailed proxy and port forwarder (uid $uid) as /proc shows them and at work"
