#!/bin/sh
# tests/integration/proxy_guard.sh SANDBOXCTL SANDBOX-PROXY FAKENET FAKE_VMM: the kernel's
# guard on the jailed proxy's upstream connects (docs/hardening.md "The proxy's jail"), as
# sandboxctl loads it at a sandbox's start and removes it at its stop. The VMM and its agent
# are fake_vmm.py (no KVM), the proxy is the real one, jailed.
#
# The whole test runs in a network namespace of its own (it re-runs itself under unshare -n):
# the guard's table is loaded there, never into the host's ruleset, and every address below
# is one this test makes: listeners on 127.0.0.1 and ::1, on 169.254.169.254 (the metadata
# address), 10.9.0.5 (in the policy's allow-cidr), 10.9.1.5 (private, not allowed) and
# 203.0.113.7 (public, but the host's own) on an interface here, the resolver on 127.0.0.1,
# and 198.51.100.1 (public, elsewhere) in a second namespace behind a veth pair.
#
# A process as the sandbox's proxy uid (setpriv) is refused by the kernel (nft counters count
# it) on loopback, link-local, private and the host's own addresses, and reaches the resolver
# (udp and tcp), the allow-cidr address and the public one; the real proxy still resolves
# and relays; a proxy uid without a guard is refused everything, another uid nothing; a port
# forwarder of the same uid still answers on the host's loopback; after `sandboxctl stop`
# the uid's guard is gone and the uid is refused everything; a stale guard of the uid is
# replaced at the next start; and when nft refuses the guard the sandbox does not start,
# saying so. 77 (skipped) when not root or without ip, nft, setpriv, unshare or python3.
set -u
ctl=$1
proxy=$2
fakenet=$3
fake_vmm=$4
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (namespaces, nft, setuid)"; exit 77; }
for c in ip nft setpriv unshare; do
	command -v $c >/dev/null 2>&1 || { echo "skipped: no $c"; exit 77; }
done
ip netns help 2>&1 | grep -q netns || { echo "skipped: this ip has no netns"; exit 77; }
# The probes run as the proxy's uid: a python3 that uid can run (not a shim under /root).
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "skipped: no python3"; exit 77; }
# Into a network namespace of its own, and make sure of it before any rule is loaded.
. "$(dirname "$0")/check_lib.sh"
own_netns "$@"
tmp=$(mktemp -d /tmp/proxy-guard.XXXXXX)
chmod 755 "$tmp" # the probe script, read as the proxy's uid
SANDBOX_HOME=$tmp/home
export SANDBOX_HOME SANDBOX_PROXY="$proxy" SANDBOX_VMM="$fake_vmm" SANDBOX_SKIP_HOST_CHECK=1
export FAKE_VMM_LOG="$tmp/fake.log"
unset SANDBOX_JAIL
peer=pguard-$$
id=
fail_show "$tmp/out" "$tmp/probe.log"
cleanup() {
	[ -n "$id" ] && "$ctl" rm -f "$id" >/dev/null 2>&1
	for f in "$tmp"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	ip netns del "$peer" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# --- the addresses -------------------------------------------------------------------------
# The local ones on this namespace's end of the veth pair to the peer (no dummy module needed).
ip link set lo up && ip netns add "$peer" &&
	ip link add gv0 type veth peer name gv1 netns "$peer" &&
	ip addr add 198.51.100.2/24 dev gv0 && ip link set gv0 up &&
	ip -n "$peer" addr add 198.51.100.1/24 dev gv1 && ip -n "$peer" link set gv1 up &&
	ip -n "$peer" link set lo up || fail "cannot make the peer namespace $peer"
for a in 169.254.169.254 10.9.0.5 10.9.1.5 203.0.113.7; do
	ip addr add $a/32 dev gv0 || fail "cannot add $a"
done
port=$((20000 + $$ % 10000))
rport=$((port + 1)) # the resolver's
hport=$((port + 2)) # a web server on the allow-cidr address
fport=$((port + 3)) # a port forwarder on the host's loopback
gport=$((port + 4)) # the "guest's" server behind it

cat >"$tmp/listen.py" <<'EOF'
# listen.py PIDFILE IP:PORT...: accept TCP on each (IPv6 in brackets), say "hello", close.
import os, select, socket, sys
socks = []
for spec in sys.argv[2:]:
    host, port = spec.rsplit(":", 1)
    fam = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((host.strip("[]"), int(port)))
    s.listen(64)
    socks.append(s)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()}\n")
while True:
    for s in select.select(socks, [], [])[0]:
        c, _ = s.accept()
        c.sendall(b"hello\n")
        c.close()
EOF
cat >"$tmp/probe.py" <<'EOF'
# probe.py tcp|udp IP PORT: "ok" (connected and read "hello"; udp: two datagrams sent) or
# the error, within 3 s; exit 0 only for ok.
import errno, socket, sys, time
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.connect((host, port))
    if proto == "tcp":
        ok = s.recv(6) == b"hello\n"
    else:
        s.send(b"\0" * 12)
        time.sleep(0.2)
        s.send(b"\0" * 12)
        ok = True
    print("ok" if ok else "connected, no hello")
    sys.exit(0 if ok else 1)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))
    sys.exit(1)
EOF
chmod 644 "$tmp/probe.py"
"$py" "$tmp/listen.py" "$tmp/listen.pid" "[::]:$port" "127.0.0.1:$rport" &
ip netns exec "$peer" "$py" "$tmp/listen.py" "$tmp/peer.pid" "198.51.100.1:$port" &
echo 'allowed.test A 10.9.0.5' >"$tmp/zone"
"$fakenet" dns --listen 127.0.0.1:$rport --zone "$tmp/zone" --pidfile "$tmp/dns.pid" \
	>>"$tmp/servers.log" 2>&1 &
"$fakenet" http --listen 10.9.0.5:$hport --pidfile "$tmp/http.pid" >>"$tmp/servers.log" 2>&1 &
"$fakenet" udp --listen 127.0.0.1:$port --pidfile "$tmp/udp.pid" >>"$tmp/servers.log" 2>&1 &
for _ in $(seq 100); do
	[ -f "$tmp/listen.pid" ] && [ -f "$tmp/peer.pid" ] && [ -f "$tmp/dns.pid" ] &&
		[ -f "$tmp/http.pid" ] && [ -f "$tmp/udp.pid" ] && break
	sleep 0.1
done

# as UID PROTO IP PORT: the probe as that uid, its answer on stdout; its status.
as() {
	as_uid=$1
	shift
	as_out=$(setpriv --reuid "$as_uid" --regid "$as_uid" --clear-groups "$py" "$tmp/probe.py" \
		"$@" 2>&1)
	as_st=$?
	echo "uid $as_uid $*: $as_out" >>"$tmp/probe.log"
	echo "$as_out"
	return $as_st
}
# counter NAME: the packets the guard's counter NAME counted (0 when there is none).
counter() {
	nft list counter inet sandbox_guard "$1" 2>/dev/null |
		awk '$1 == "packets" { print $2; found = 1 } END { if (!found) print 0 }'
}
# guarded UID: the map sends UID to its own chain, and that chain is there.
guarded() {
	nft list map inet sandbox_guard proxies 2>/dev/null | grep -q "$1 : jump proxy_$1" &&
		nft list chain inet sandbox_guard "proxy_$1" >/dev/null 2>&1
}
# refused_all UID WHAT: every address, the resolver and the public one too, refused.
refused_all() {
	refuse "$2: 127.0.0.1" as "$1" tcp 127.0.0.1 $port
	refuse "$2: the resolver (tcp)" as "$1" tcp 127.0.0.1 $rport
	refuse "$2: the resolver (udp)" as "$1" udp 127.0.0.1 $rport
	refuse "$2: the allow-cidr address" as "$1" tcp 10.9.0.5 $port
	refuse "$2: a public address" as "$1" tcp 198.51.100.1 $port
}

# --- a sandbox with a network, its jailed proxy under its guard ------------------------------
mkdir -p "$SANDBOX_HOME/images/fake"
head -c 1 /dev/zero >"$SANDBOX_HOME/images/fake/kernel"
head -c 1 /dev/zero >"$SANDBOX_HOME/images/fake/initrd"
truncate -s 16M "$SANDBOX_HOME/images/fake/rootfs"
"$ctl" create --image fake --memory 128 --network proxy --deny-all --allow allowed.test \
	--allow-cidr 10.9.0.0/24 --allow-port $hport --resolver 127.0.0.1:$rport \
	>"$tmp/id" 2>"$tmp/out" || fail "create: $(cat "$tmp/out")"
id=$(tail -n 1 "$tmp/id")
sb=$SANDBOX_HOME/sandboxes/$id
uid=$((0x50010000 + 0x$(echo "$id" | cut -c1-4)))
other=$((0x50010000 + 0xfffe))
[ "$other" = "$uid" ] && other=$((other - 1))
[ -f "$sb/proxy.pid" ] && grep -q "^Uid:[[:space:]]*$uid" "/proc/$(cat "$sb/proxy.pid")/status" ||
	fail "no jailed proxy of uid $uid: $(cat "$sb/proxy.log" 2>&1)"
check "the guard of uid $uid is loaded" guarded $uid
nft list table inet sandbox_guard >"$tmp/table" 2>&1
grep -q "meta skuid 1342242816-1342308351 jump proxy" "$tmp/table" ||
	soft_fail "the output chain does not send every proxy uid to the guard"

# As the proxy's uid: what the kernel refuses, counted, and what it lets through.
before_loopback=$(counter loopback)
before_link_local=$(counter link-local)
before_private=$(counter private)
before_host_own=$(counter host-own)
refuse "uid $uid: 127.0.0.1 (loopback)" as $uid tcp 127.0.0.1 $port
refuse "uid $uid: ::1 (loopback)" as $uid tcp ::1 $port
refuse "uid $uid: 169.254.169.254 (metadata)" as $uid tcp 169.254.169.254 $port
refuse "uid $uid: 10.9.1.5 (private, not in allow-cidr)" as $uid tcp 10.9.1.5 $port
refuse "uid $uid: 203.0.113.7 (the host's own)" as $uid tcp 203.0.113.7 $port
refuse "uid $uid: 127.0.0.1 udp" as $uid udp 127.0.0.1 $port
[ "$(counter loopback)" -ge $((before_loopback + 3)) ] ||
	soft_fail "the loopback counter: $(counter loopback), before $before_loopback"
[ "$(counter link-local)" -gt "$before_link_local" ] ||
	soft_fail "the link-local counter did not count 169.254.169.254"
[ "$(counter private)" -gt "$before_private" ] || soft_fail "the private counter did not count"
[ "$(counter host-own)" -gt "$before_host_own" ] || soft_fail "the host-own counter did not count"
check "uid $uid: the resolver (tcp)" as $uid tcp 127.0.0.1 $rport
check "uid $uid: the resolver (udp)" as $uid udp 127.0.0.1 $rport
check "uid $uid: 10.9.0.5 (allow-cidr)" as $uid tcp 10.9.0.5 $port
check "uid $uid: 198.51.100.1 (public)" as $uid tcp 198.51.100.1 $port
# The real proxy, under its guard: it resolves through the resolver and relays to allow-cidr.
ns=/run/netns/sbx-$id
out=$(ip netns exec "sbx-$id" "$fakenet" query --connect 10.0.2.1:53 allowed.test 2>&1)
echo "$out" | grep -q '^A 10\.' || soft_fail "DNS through the guarded proxy: $out"
out=$(ip netns exec "sbx-$id" "$fakenet" client --connect 10.0.2.1:3128 \
	--send "GET http://10.9.0.5:$hport/echo HTTP/1.1\r\nHost: 10.9.0.5:$hport\r\nConnection: close\r\n\r\n" 2>&1)
echo "$out" | grep -q '^HTTP/1.1 200' || soft_fail "GET through the guarded proxy: $out"
# Fail closed: a proxy uid with no guard; the guard concerns proxy uids only.
before=$(counter unguarded)
refused_all $other "uid $other (a proxy uid, no guard)"
[ "$(counter unguarded)" -gt "$before" ] || soft_fail "the unguarded counter did not count"
check "uid 65534 (not a proxy's): 127.0.0.1" as 65534 tcp 127.0.0.1 $port
# A port forwarder of the proxy's uid (sandboxctl port) answers on the host's loopback: the
# guard lets a proxy uid answer a connection made to it.
ip -n "sbx-$id" addr add 10.0.2.2/32 dev lo &&
	ip netns exec "sbx-$id" "$py" "$tmp/listen.py" "$tmp/guest.pid" "10.0.2.2:$gport" &
"$proxy" forward --netns "$ns" --listen 127.0.0.1:$fport --to 10.0.2.2:$gport \
	--jail uid=$uid,gid=$uid 2>>"$tmp/out" &
echo $! >"$tmp/forward.pid"
for _ in $(seq 50); do [ -f "$tmp/guest.pid" ] && break; sleep 0.1; done
sleep 0.5
check "a port forwarder of uid $uid answers on 127.0.0.1" "$py" "$tmp/probe.py" tcp 127.0.0.1 $fport
kill "$(cat "$tmp/forward.pid")" "$(cat "$tmp/guest.pid")" 2>/dev/null
rm -f "$tmp/forward.pid" "$tmp/guest.pid"

# --- stop: the guard goes ---------------------------------------------------------------
"$ctl" stop "$id" >"$tmp/out" 2>&1 || fail "stop: $(cat "$tmp/out")"
refuse "the guard of uid $uid after stop" guarded $uid
refused_all $uid "uid $uid after stop"

# A stale guard of the uid (one letting 169.254.0.0/16 through) is replaced at the start.
mkdir "$tmp/stale" && "$proxy" prepare "$tmp/stale" --allow-cidr 169.254.0.0/16 \
	--resolver 127.0.0.1:53 >/dev/null 2>&1 &&
	"$proxy" guard "$tmp/stale" --uid $uid --uids 1342242816-1342308351 >"$tmp/stale.nft" &&
	nft -f "$tmp/stale.nft" ||
	fail "cannot load a stale guard"
check "uid $uid: 169.254.169.254 under the stale guard" as $uid tcp 169.254.169.254 $port
"$ctl" start "$id" >"$tmp/out" 2>&1 || fail "start: $(cat "$tmp/out")"
refuse "uid $uid: 169.254.169.254 once the sandbox started again" as $uid tcp 169.254.169.254 $port
check "uid $uid: 10.9.0.5 once the sandbox started again" as $uid tcp 10.9.0.5 $port
"$ctl" stop "$id" >"$tmp/out" 2>&1 || fail "stop: $(cat "$tmp/out")"

# --- nft refuses the guard: the sandbox does not start -------------------------------------
mkdir "$tmp/bin"
cat >"$tmp/bin/nft" <<EOF
#!/bin/sh
t=\$(cat)
case \$t in *sandbox_guard*) echo "Error: refused by the test" >&2; exit 1 ;; esac
printf '%s\n' "\$t" | exec $(command -v nft) "\$@"
EOF
chmod 755 "$tmp/bin/nft"
if PATH=$tmp/bin:$PATH "$ctl" start "$id" >"$tmp/out" 2>&1; then
	soft_fail "start succeeded though nft refused the guard"
else
	grep -q "nft" "$tmp/out" || soft_fail "the refusal does not name nft: $(cat "$tmp/out")"
	echo "ok: start refused when nft refuses the guard: $(grep -m1 nft "$tmp/out")"
fi
[ ! -f "$sb/proxy.pid" ] || soft_fail "a proxy left running though its guard did not load"
refuse "the guard of uid $uid after the refused start" guarded $uid

"$ctl" rm -f "$id" >"$tmp/out" 2>&1 || soft_fail "rm: $(cat "$tmp/out")"
id=
checks_end "proxy guard"
echo "ok: the jailed proxy's upstream connects are guarded by the kernel (uid $uid)"
