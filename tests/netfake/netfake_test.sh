#!/bin/sh
# tests/netfake/netfake_test.sh FAKENET.SH FAKENET: the fake internet works from the host's
# namespace (DNS, HTTP, HTTPS with the test CA, the banner service) and goes away whole.
# 77 (skipped) when not root or without iproute2. Uses fakenet's own clients, so it runs where
# there is no curl (the emulated host); curl is also tried when present.
set -u
sh_up=$1
fakenet=$2
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
[ -x /usr/bin/ip ] || command -v ip >/dev/null 2>&1 || { echo "skipped: no ip (iproute2)"; exit 77; }
[ -x /usr/bin/ip ] && ip() { /usr/bin/ip "$@"; }
if ! ip netns help 2>&1 | grep -q 'netns'; then
	echo "skipped: this ip has no netns (not iproute2)"
	exit 77
fi
dir=$(mktemp -d /tmp/netfake-test.XXXXXX)
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
cleanup() {
	sh "$sh_up" down "$dir" || fail "down failed"
}
trap cleanup EXIT

sh "$sh_up" up "$dir" "$fakenet" || { echo "FAIL: fakenet.sh up"; exit 1; }
. "$dir/env"

# DNS: A answers, several A, NXDOMAIN, AAAA empty; every query logged.
out=$("$fakenet" query --connect "$FAKENET_DNS" example.test)
[ "$out" = "$(printf 'rcode=NOERROR\nA 203.0.113.10')" ] || fail "dns example.test: $out"
out=$("$fakenet" query --connect "$FAKENET_DNS" MULTI.example.test.)
[ "$out" = "$(printf 'rcode=NOERROR\nA 203.0.113.10\nA 203.0.113.12')" ] || fail "dns multi: $out"
out=$("$fakenet" query --connect "$FAKENET_DNS" nothere.test)
[ "$out" = "rcode=NXDOMAIN" ] || fail "dns nothere.test: $out"
out=$("$fakenet" query --connect "$FAKENET_DNS" example.test AAAA)
[ "$out" = "rcode=NOERROR" ] || fail "dns AAAA: $out"
grep -qx 'nothere.test A' "$dir/dns.log" || fail "dns log lacks 'nothere.test A'"
grep -qx 'example.test AAAA' "$dir/dns.log" || fail "dns log lacks 'example.test AAAA'"

# HTTP: the echo of the request head, /bytes/N, POST bodies; the log has the head.
req='GET /echo HTTP/1.1\r\nHost: example.test\r\nX-Test-Header: hello42\r\nConnection: close\r\n\r\n'
out=$("$fakenet" client --connect 203.0.113.10:80 --send "$req")
echo "$out" | grep -q '^X-Test-Header: hello42' || fail "http echo: $out"
grep -q '^X-Test-Header: hello42' "$dir/web10-http.log" || fail "http log lacks the header"
n=$("$fakenet" client --connect 203.0.113.10:80 \
	--send 'GET /bytes/1000000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' | wc -c)
[ "$n" -gt 1000000 ] && [ "$n" -lt 1000300 ] || fail "http /bytes/1000000: $n bytes with the head"
out=$("$fakenet" client --connect 203.0.113.10:80 \
	--send 'POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello')
echo "$out" | grep -q '^Body-Length: 5' || fail "http POST: $out"

# HTTPS: verified against the test CA, the certificate chosen by SNI.
for name in example.test api.example.test; do
	out=$("$fakenet" client --connect 203.0.113.10:443 --tls $name --cacert "$FAKENET_CA" \
		--send "GET /echo HTTP/1.1\r\nHost: $name\r\nConnection: close\r\n\r\n") ||
		fail "https $name: client failed"
	echo "$out" | grep -q "^Host: $name" || fail "https $name: $out"
done
grep -q '^--- https .* sni api.example.test$' "$dir/web10-https.log" || fail "https log lacks the SNI"
out=$("$fakenet" client --connect 203.0.113.11:443 --tls denied.test --cacert "$FAKENET_CA" \
	--send 'GET / HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n')
echo "$out" | grep -q '^HTTP/1.1 200' || fail "https denied.test on .11: $out"
# A name the server has no certificate for fails verification.
if "$fakenet" client --connect 203.0.113.11:443 --tls example.test --cacert "$FAKENET_CA" \
	--send 'GET / HTTP/1.1\r\nHost: example.test\r\n\r\n' >/dev/null 2>&1; then
	fail "https example.test on .11 verified"
fi
if command -v curl >/dev/null 2>&1; then
	out=$(curl -sS --max-time 10 --resolve example.test:443:203.0.113.10 --cacert "$FAKENET_CA" \
		-H 'X-Curl: yes' https://example.test/echo) || fail "curl https"
	echo "$out" | grep -q '^X-Curl: yes' || fail "curl https echo: $out"
	n=$(curl -sS --max-time 20 -o /dev/null -w '%{size_download}' http://203.0.113.10/bytes/33554432)
	[ "$n" = 33554432 ] || fail "curl /bytes/33554432: $n"
	out=$(curl -sS --max-time 10 --resolve www.allowed.test:443:203.0.113.10 --cacert "$FAKENET_CA" \
		--data-binary 'abc' https://www.allowed.test/post) || fail "curl POST"
	echo "$out" | grep -q '^Body-Length: 3' || fail "curl POST: $out"
fi

# Banner: server first, then line echo; connections logged.
out=$("$fakenet" client --connect 203.0.113.10:2222 --send 'ping\n')
[ "$out" = "$(printf 'SSH-2.0-fakenet-web10\nping')" ] || fail "banner: $out"
grep -q '^connect 203.0.113.1:' "$dir/web10-banner.log" || fail "banner log"

# UDP echo on .10:9999: a DNS query sent there comes back as it went (query prints whatever it
# makes of it); the datagram is logged.
"$fakenet" query --connect 203.0.113.10:9999 example.test >/dev/null 2>&1 || fail "udp echo: no answer"
grep -q '^from 203.0.113.1:[0-9]* len 30$' "$dir/web10-udp.log" || fail "udp log: $(cat "$dir/web10-udp.log")"

# The benchmark clients: get (throughput) and connect-bench (time to the first byte).
out=$("$fakenet" get --connect 203.0.113.10:80 --host example.test --path /bytes/10000000 --stall 5)
echo "$out" | grep -q '^bytes=10000000 seconds=[0-9.]* MBps=[0-9.]*$' || fail "get: $out"
"$fakenet" get --connect 203.0.113.10:80 --host example.test --path /status/404 --stall 5 \
	>/dev/null 2>&1 && fail "get of a 404 succeeded"
out=$("$fakenet" connect-bench --connect 203.0.113.10:80 --host example.test --count 5)
echo "$out" | grep -q '^connect_ms median=[0-9.]* min=[0-9.]* max=[0-9.]* n=5$' ||
	fail "connect-bench: $out"

# Down: no servers, no namespace, no veth.
trap - EXIT
sh "$sh_up" down "$dir" || fail "down failed"
ip netns list | grep -q '^fakeinet\b' && fail "namespace fakeinet left behind"
ip link show fi-host >/dev/null 2>&1 && fail "fi-host left behind"
ls "$dir"/*.pid >/dev/null 2>&1 && fail "pidfiles left behind"
if [ $fails -eq 0 ]; then
	rm -rf "$dir"
	echo "netfake: ok"
	exit 0
fi
echo "netfake: $fails failures (logs in $dir)"
exit 1
