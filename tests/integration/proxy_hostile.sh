#!/bin/sh
# tests/integration/proxy_hostile.sh SANDBOX-PROXY FAKENET: issue 29's four ways past the
# per-request Host check of plain HTTP (docs/network.md "Decisions"), against an upstream that
# logs every byte it receives. allowed.test and denied.test are served from one address (shared
# hosting), so a request for denied.test relayed to allowed.test's address reaches it; none may
# arrive: (a) a head that starts with CRLF, a lower-case method or bare LF lines on a synthetic
# address; (b) a partial head that stalls, and silence then a request, on port 80; (c) CONNECT
# allowed.test:80 (and :8080, a port where the server may speak first) then a request for
# denied.test; (d) a chunked trailer that hides a request behind bare LFs (and a well-formed
# trailer, which must be dropped). Normal requests to allowed.test (transparent, absolute-URI,
# CONNECT) and a non-HTTP protocol through CONNECT still work.
#
# The proxy runs unjailed (root, the host's network namespace) with its listeners in a
# namespace made here, where an nft rule sends the guest's connections to synthetic addresses
# to the transparent listener, as the sandbox's ruleset does for the tap. The upstream (a
# Python server logging every byte, on ports 80 and 8080) and the DNS server the proxy resolves
# with (fakenet) are in a second namespace made here, reached over a veth pair on a /30 of
# 198.51.100.0/24 (documentation addresses: public to the proxy, no CIDR rule needed). No
# traffic leaves the two namespaces and the veth. Takes about 12 s (the stalls wait out the
# proxy's 10 s for first bytes). 77 (skipped) when not root or without ip, nft or python3.
set -u
proxy=$1
fakenet=$2
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (namespaces)"; exit 77; }
for t in ip nft python3; do
	command -v "$t" >/dev/null 2>&1 || { echo "skipped: no $t"; exit 77; }
done
ip netns help 2>&1 | grep -q netns || { echo "skipped: this ip has no netns"; exit 77; }

ns=phg-$$  # the guest's side: the proxy's listeners
uns=phu-$$ # the upstream side
vh=phh$$
vu=phu$$
net=$((($$ % 64) * 4))
host_ip=198.51.100.$((net + 1))
up_ip=198.51.100.$((net + 2))
tmp=$(mktemp -d /tmp/proxy-hostile.XXXXXX)
sb=$tmp/sb
pid=
. "$(dirname "$0")/check_lib.sh"
fail_show "$tmp/proxy.log" "$tmp/upstream.err"
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for f in "$tmp"/*.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	ip link del "$vh" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	ip netns del "$uns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$ns" && ip -n "$ns" link set lo up && ip -n "$ns" addr add 10.0.2.1/32 dev lo &&
	ip -n "$ns" route add 10.0.128.0/17 dev lo || fail "cannot make namespace $ns"
printf '%s\n' 'table ip hostile {' ' chain out {' \
	'  type nat hook output priority -100; policy accept;' \
	'  ip daddr 10.0.128.0/17 meta l4proto tcp dnat to 10.0.2.1:15001' ' }' '}' |
	ip netns exec "$ns" nft -f - || fail "cannot load the redirect rule in $ns"
ip netns add "$uns" && ip -n "$uns" link set lo up &&
	ip link add "$vh" type veth peer name "$vu" netns "$uns" &&
	ip addr add "$host_ip/30" dev "$vh" && ip link set "$vh" up &&
	ip -n "$uns" addr add "$up_ip/30" dev "$vu" && ip -n "$uns" link set "$vu" up ||
	fail "cannot make the upstream namespace $uns and its veth"

# The upstream: every byte received appended to upstream.log; a short 200 for each blank line
# (a head's end) so that clients see an answer.
cat >"$tmp/upstream.py" <<'EOF'
import os, socket, sys, threading
ip, log, pidfile = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
def serve(c):
    c.settimeout(30)
    seen = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            with lock, open(log, "ab") as f:
                f.write(d)
            n = (seen + d).count(b"\r\n\r\n") - seen.count(b"\r\n\r\n")
            seen = (seen + d)[-3:]
            for _ in range(n):
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    except OSError:
        pass
    c.close()
def listen(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port))
    s.listen(64)
    return s
socks = [listen(80), listen(8080)]
open(pidfile, "w").write(str(os.getpid()))
def accept(s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=accept, args=(socks[1],), daemon=True).start()
accept(socks[0])
EOF
# The guest's client: IP PORT then steps "s:TEXT" (send, with \r \n escapes), "w:SECONDS"
# (wait), "e" (end its sending: a half-close); then what comes back until the proxy closes
# (15 s at most), on stdout.
cat >"$tmp/client.py" <<'EOF'
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
try:
    for step in sys.argv[3:]:
        if step.startswith("w:"):
            time.sleep(float(step[2:]))
        elif step == "e":
            c.shutdown(socket.SHUT_WR)
        else:
            c.sendall(step[2:].replace("\\r", "\r").replace("\\n", "\n").encode())
    out = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        out += d
except OSError as e:
    out = locals().get("out", b"") + ("(%s)" % e).encode()
sys.stdout.write(out.decode("latin-1"))
EOF
touch "$tmp/upstream.log"
ip netns exec "$uns" python3 "$tmp/upstream.py" "$up_ip" "$tmp/upstream.log" "$tmp/upstream.pid" \
	2>"$tmp/upstream.err" &
printf '%s\n' "allowed.test A $up_ip" "denied.test A $up_ip" >"$tmp/zone"
ip netns exec "$uns" "$fakenet" dns --listen "$up_ip:53" --zone "$tmp/zone" \
	--pidfile "$tmp/dns.pid" 2>"$tmp/dns.err" &
mkdir -m 700 "$sb"
"$proxy" prepare "$sb" --deny-all --allow allowed.test --allow-port 8080 \
	--resolver "$up_ip:53" >/dev/null || fail "sandbox-proxy prepare"
"$proxy" run "$sb" --netns "/run/netns/$ns" 2>"$tmp/proxy.log" &
pid=$!
synth=
for _ in $(seq 50); do
	synth=$(ip netns exec "$ns" "$fakenet" query --connect 10.0.2.1:53 allowed.test 2>/dev/null |
		awk '$1 == "A" { print $2 }')
	[ -n "$synth" ] && [ -f "$tmp/upstream.pid" ] && break
	sleep 0.1
done
[ -n "$synth" ] || fail "no synthetic address for allowed.test from the proxy's DNS"

# run NAME IP PORT STEP...: the client in the guest's namespace, its output in NAME.out
run() {
	name=$1
	shift
	ip netns exec "$ns" python3 "$tmp/client.py" "$@" >"$tmp/$name.out" 2>&1
}
GET_DENIED='Host: denied.test\r\n\r\n'
# (b) first, in the background: they wait out the proxy's 10 s for first bytes.
run b1 "$synth" 80 "s:GET /b1 HTTP/1.1\r\nHost: denied.test\r\n" &
b1=$!
run b2 "$synth" 80 w:11 "s:GET /b2 HTTP/1.1\r\n$GET_DENIED" &
b2=$!

# (a) heads a lenient server reads as a request, on allowed.test's synthetic address
run a1 "$synth" 80 "s:\r\nGET /a1 HTTP/1.1\r\n$GET_DENIED"
run a2 "$synth" 80 "s:get /a2 HTTP/1.1\r\n$GET_DENIED"
run a3 "$synth" 80 "s:GET /a3 HTTP/1.1\nHost: denied.test\n\n"
run a4 "$synth" 80 \
	"s:GET /a4 HTTP/1.1\r\nHost: allowed.test\r\n\r\nget /a4b HTTP/1.1\r\n$GET_DENIED" e
# (c) a CONNECT tunnel to allowed.test, then a request for denied.test
connect80='s:CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n'
connect8080='s:CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n'
run c1 10.0.2.1 3128 "$connect80" w:0.5 "s:GET /c1 HTTP/1.1\r\n$GET_DENIED"
run c2 10.0.2.1 3128 "$connect8080" w:1 "s:GET /c2 HTTP/1.1\r\n$GET_DENIED"
run c3 10.0.2.1 3128 "$connect80" w:0.5 "s:GET /c3 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" \
	w:0.5 "s:GET /c3b HTTP/1.1\r\n$GET_DENIED" e
# (d) a chunked body's trailer hiding a request behind bare LFs; a well-formed trailer
chunked='Host: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n'
run d1 "$synth" 80 "s:POST /d1 HTTP/1.1\r\n$chunked" \
	"s:X: y\n\nGET /d1b HTTP/1.1\r\n$GET_DENIED" e
run d2 "$synth" 80 "s:POST /d2 HTTP/1.1\r\n$chunked" "s:X-Trailer-D2: 1\r\n\r\n" \
	"s:GET /d2b HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" e
# (e) found by a review: HTTP/0.9 with an absolute URI (servers serve the URI's site), a
# PROXY-protocol line before a request (its listener drops it), something neither TLS nor
# HTTP on port 80
run e1 "$synth" 80 "s:GET http://denied.test/e1\r\n" e
run e2 10.0.2.1 3128 "$connect80" w:0.5 "s:GET x://denied.test/e2\r\n" e
run e3 10.0.2.1 3128 "$connect8080" w:1 \
	"s:PROXY TCP4 10.0.0.1 10.0.0.2 1234 80\r\nGET /e3 HTTP/1.1\r\n$GET_DENIED" e
run e4 "$synth" 80 "s:SSH-2.0-e4\r\n" e
# What must still work
run ok1 "$synth" 80 "s:GET /ok1 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" e
run ok2 10.0.2.1 3128 "s:GET http://allowed.test/ok2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" e
run ok3 10.0.2.1 3128 "$connect80" w:0.5 \
	"s:GET /ok3 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" e
run ok4 10.0.2.1 3128 "$connect8080" w:1 "s:SSH-2.0-hostile-test\r\n" e
wait "$b1" "$b2"

# expect NAME PATTERN: NAME's output has PATTERN (a grep -E on its first lines)
expect() {
	grep -Eq "$2" "$tmp/$1.out" || soft_fail "$1: expected /$2/, got: $(head -c 300 "$tmp/$1.out")"
}
expect a1 '^HTTP/1.1 400 '
expect a2 '^HTTP/1.1 403 '
expect a3 '^HTTP/1.1 400 '
expect a4 '^HTTP/1.1 200 '
expect c1 'HTTP/1.1 403 '
expect c2 'HTTP/1.1 403 '
expect c3 '^ok$'
expect d2 '^ok$'
expect ok1 '^ok$'
expect ok2 '^ok$'
expect ok3 '^ok$'
expect ok4 '^HTTP/1.1 200 Connection established'
expect b1 '^HTTP/1.1 400 '
expect e1 '^HTTP/1.1 400 '
expect e3 'HTTP/1.1 400 '
# Upstream: nothing for denied.test, no trailer, and what must work arrived.
if grep -aq 'denied' "$tmp/upstream.log"; then
	soft_fail "bytes for denied.test reached upstream (requests in its log: $(grep -aoiE \
		'(GET|POST) /[a-z0-9]+' "$tmp/upstream.log" | tr '\n' ' '))"
fi
cr=$(printf '\r')
grep -aq 'SSH-2.0-e4' "$tmp/upstream.log" && soft_fail "a non-HTTP protocol went raw on port 80"
for p in a1 a2 a3 a4b b1 b2 c1 c2 c3b d1b e1 e2 e3; do
	grep -aqiE "GET [^ ]*/$p( |$cr|\$)" "$tmp/upstream.log" && soft_fail "request /$p reached upstream"
done
grep -aq 'X-Trailer-D2' "$tmp/upstream.log" && soft_fail "a trailer was passed upstream"
for p in a4 c3 d1 d2 d2b ok1 ok2 ok3; do
	grep -aqE " /$p HTTP/1.1" "$tmp/upstream.log" || soft_fail "request /$p did not reach upstream"
done
grep -aq 'SSH-2.0-hostile-test' "$tmp/upstream.log" ||
	soft_fail "a non-HTTP protocol through CONNECT did not reach upstream"
for r in 'malformed HTTP request' 'another host than the connection'; do
	grep -q "$r" "$sb/proxy/audit.log" || soft_fail "the audit log has no \"$r\" denial"
done
kill -0 "$pid" 2>/dev/null || soft_fail "the proxy died: $(tail -3 "$tmp/proxy.log")"
checks_end "hostile plain HTTP"
echo "ok: no byte for denied.test reached upstream by any of the four ways; allowed requests work"
