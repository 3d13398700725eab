#!/bin/sh
# The LangSmith JS client, unchanged (npm langsmith 0.12.0 with ws 8.23.1, pinned and fetched
# by tools/dev setup), against sandboxd on real guests (issue 30, "The real client"): the
# scenario tests/service/scenario.mjs with ws, then its checks that need no WebSocket without
# ws (the client's /execute fallback).
#
# sandboxd runs where Linux guests boot (route.sh): natively on hardware KVM, on this host's
# loopback; else in the emulated host (L1), listening on L1's eth0 with plain HTTP (the only
# way in is QEMU's forward of this host's 127.0.0.1:PORT: `route.sh --forward`), its
# dataplane_url the forwarded address (--public-url). node always runs here. Between the two
# sides: the inner part (start.sh) prints "service-ready url=... key.node1=... key.node2=..."
# on its stdout, which route.sh streams back; a connection to a second forwarded port tells it
# to stop sandboxd, which must end on SIGTERM leaving no VMM.
#
# usage: service_node.sh SANDBOXD SANDBOXCTL VMM KERNEL INITRD
# Workspaces: node1 (no quota), node2 (quota sandboxes=1). SCENARIO_SUBSET in the environment
# narrows the run with ws (by hand). Exit: 0 pass, 1 fail, 77 skip (no
# sandboxd built, no node, the client not fetched, no guest kernel).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

# Where the guests boot: a fresh $SANDBOX_HOME for the busybox image, then start.sh.
if [ "${1-}" = --inner ]; then
	sandboxd=$2 ctl=$3 kernel=$4 initrd=$5 rootfs=$6 port=$7 stopport=$8 opport=$9
	shift 9
	certs=$1 tlsport=$2 tlsstop=$3
	imgs=$(mktemp -d)
	trap 'rm -rf "$imgs"' EXIT
	SANDBOX_HOME=$imgs "$ctl" images import busybox --kernel "$kernel" --initrd "$initrd" \
		--rootfs "$rootfs" >&2 || { echo "FAIL: images import"; exit 1; }
	if [ "${DEVHOST:-}" = 1 ]; then
		# (192.168.253.15: L1's eth0 on QEMU's restricted network, tools/devhost/run --forward)
		set -- --listen 192.168.253.15:8380 --insecure-http --public-url "http://127.0.0.1:$port" \
			--operator 127.0.0.1:8381
		stop=192.168.253.15:8390
		tls_listen=192.168.253.15:8443 tls_stop=192.168.253.15:8391
	else
		set -- --listen "127.0.0.1:$port" --operator "127.0.0.1:$opport"
		stop=127.0.0.1:$stopport
		tls_listen=127.0.0.1:$tlsport tls_stop=127.0.0.1:$tlsstop
	fi
	# A second sandboxd, over TLS (HTTPS and WSS with the test's CA), for the scenario's TLS
	# subset: its own state, its own workspaces; it prints its own ready line.
	SERVICE_LOG=1 sh "$top/tests/service/start.sh" "$sandboxd" --fresh "$imgs/images" \
		--workspace tls1 --workspace tls2 --stop-on "$tls_stop" --deadline 2400 \
		-- --listen "$tls_listen" --public-url "https://127.0.0.1:$tlsport" \
		--operator 127.0.0.1:8382 --tls-cert "$certs/server.pem" --tls-key "$certs/server.key" \
		--default-image busybox &
	tlspid=$!
	SERVICE_LOG=1 sh "$top/tests/service/start.sh" "$sandboxd" --fresh "$imgs/images" \
		--workspace node1 --workspace node2,sandboxes=1 --stop-on "$stop" --deadline 2400 \
		-- "$@" --default-image busybox
	st=$?
	wait "$tlspid" || st=1
	exit $st
fi

sandboxd=$1 ctl=$2 vmm=$3 kernel=$4 initrd=$5
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$sandboxd" ] || skip "sandboxd is not built ($sandboxd)"
command -v node >/dev/null || skip "no node (tools/dev setup installs Debian's nodejs)"
paths=$("$top/tools/dev" node-paths) || skip "the LangSmith JS client is not fetched (tools/dev setup)"
with_ws=$(printf '%s' "$paths" | sed -n 's/^with_ws=\([^ ]*\) .*/\1/p')
without_ws=$(printf '%s' "$paths" | sed -n 's/.* without_ws=\([^ ]*\)$/\1/p')
[ -d "$with_ws/ws" ] && [ -d "$without_ws/langsmith" ] && [ ! -e "$without_ws/ws" ] ||
	{ echo "FAIL: tools/dev node-paths: $paths"; exit 1; }
[ -e "$kernel" ] || skip "guest kernel $kernel not built (run tools/dev setup)"
build=$(cd "$(dirname "$vmm")/.." && pwd)
rootfs=$("$top/guest/image/busybox.sh" "$build/guest/sandbox-init") ||
	{ echo "FAIL: cannot build the busybox image"; exit 1; }

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port) stopport=$(free_port) opport=$(free_port) tlsport=$(free_port) tlsstop=$(free_port)
work=$(mktemp -d)
# The TLS instance's certificate, for 127.0.0.1 (where the client reaches it), from a CA of
# the test's own that only the scenario's node trusts (NODE_EXTRA_CA_CERTS).
certs=$work/certs
mkdir -p "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" -days 2 \
	-subj /CN=service-node-test-ca >/dev/null 2>&1 &&
	openssl req -newkey rsa:2048 -nodes -keyout "$certs/server.key" -out "$certs/server.csr" \
		-subj /CN=127.0.0.1 >/dev/null 2>&1 &&
	printf 'subjectAltName=IP:127.0.0.1\n' >"$certs/ext" &&
	openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
		-CAcreateserial -days 2 -extfile "$certs/ext" -out "$certs/server.pem" >/dev/null 2>&1 ||
	{ echo "FAIL: openssl could not make the test's certificates"; exit 1; }
rpid=""
stop_service() {
	for p in "$tlsstop" "$stopport"; do
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10).close()' \
			"$p" 2>/dev/null
	done
}
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	if [ -n "$rpid" ] && kill -0 "$rpid" 2>/dev/null; then
		stop_service
		i=0
		while kill -0 "$rpid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		# route.sh's own child (devhost/run, whose trap ends its QEMU), then route.sh
		pkill -TERM -P "$rpid" 2>/dev/null
		kill -TERM "$rpid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

: >"$work/serve.out"
: >"$work/serve.err"
"$here/route.sh" "$build" --linux --timeout 2400 --memory 4096 --add "$(dirname "$rootfs")" \
	--add "$certs" --forward "$port:8380" --forward "$stopport:8390" --forward "$tlsport:8443" \
	--forward "$tlsstop:8391" -- \
	"$0" --inner "$sandboxd" "$ctl" "$kernel" "$initrd" "$rootfs" "$port" "$stopport" "$opport" \
	"$certs" "$tlsport" "$tlsstop" \
	>"$work/serve.out" 2>"$work/serve.err" &
rpid=$!

# The ready lines: the emulated host boots in a minute or two (route.sh retries a boot that
# hangs); bounded at 15 minutes, and at once when route.sh ended. Only route.sh's last
# attempt counts: one that hung may have printed a line of its own first, with a key of a
# state since gone (a TLS check once got 401 on every call so).
last_attempt() {
	awk '/^route: attempt [0-9]+: /{n=NR} {l[NR]=$0} END{for(i=n+1;i<=NR;i++)print l[i]}' \
		"$work/serve.out"
}
# The ready lines of route.sh's last attempt, both (bounded at 15 minutes; at once when
# route.sh ended): url, key, key2, tlsurl, tlskey, tlskey2.
wait_ready() {
	i=0 ready="" tlsready=""
	while [ $i -lt 900 ] && kill -0 "$rpid" 2>/dev/null; do
		ready=$(last_attempt | grep '^service-ready url=http:' | head -1)
		tlsready=$(last_attempt | grep '^service-ready url=https:' | head -1)
		[ -n "$ready" ] && [ -n "$tlsready" ] && break
		sleep 1
		i=$((i + 1))
	done
	if [ -z "$ready" ]; then
		echo "FAIL: sandboxd never said it was ready; route.sh and the service said:"
		cat "$work/serve.out" "$work/serve.err"
		exit 1
	fi
	url=$(field url) key=$(field key.node1) key2=$(field key.node2)
	ready=$tlsready
	tlsurl=$(field url) tlskey=$(field key.tls1) tlskey2=$(field key.tls2)
}
field() { printf '%s\n' "$ready" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
attempts() { grep -c '^route: attempt [0-9]*: ' "$work/serve.out"; }

# The three runs of the scenario; rc 1 when one failed.
run_scenarios() {
	rc=0
	# It listens; it must also answer the key it made (through the forward, in the
	# emulated host).
	python3 -c '
import sys, time, urllib.request
for _ in range(120):
    try:
        req = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": sys.argv[2]})
        if urllib.request.urlopen(req, timeout=5).status == 200:
            sys.exit(0)
    except Exception as e:
        why = e
    time.sleep(0.5)
sys.exit("FAIL: %s did not answer 200 within 60 s: %s" % (sys.argv[1], why))' \
		"$url/api/v2/sandboxes/boxes" "$key" || { rc=1; return; }
	SANDBOXD_URL=$url SANDBOXD_KEY=$key SANDBOXD_KEY2=$key2 SCENARIO_CHECK_TIMEOUT_S=300 \
		SCENARIO_NODE_MODULES=$with_ws timeout -k 5 1800 node "$top/tests/service/scenario.mjs" ||
		{ rc=1; echo "FAIL: the scenario with ws"; }
	echo "--- without ws (the /execute fallback)"
	SANDBOXD_URL=$url SANDBOXD_KEY=$key SANDBOXD_KEY2=$key2 SCENARIO_CHECK_TIMEOUT_S=300 \
		SCENARIO_NODE_MODULES=$without_ws SCENARIO_SUBSET=@no-ws \
		timeout -k 5 900 node "$top/tests/service/scenario.mjs" ||
		{ rc=1; echo "FAIL: the scenario without ws"; }
	echo "--- over TLS (HTTPS and WSS, the test's CA)"
	SANDBOXD_URL=$tlsurl SANDBOXD_KEY=$tlskey SANDBOXD_KEY2=$tlskey2 SCENARIO_CHECK_TIMEOUT_S=300 \
		SCENARIO_NODE_MODULES=$with_ws NODE_EXTRA_CA_CERTS=$certs/ca.pem \
		SCENARIO_SUBSET=create_default,get,list,run_exit,run_streams,stream_callbacks,wait_false_input,wait_false_kill,pty,files_text,files_binary,download_url,not_found,auth,delete \
		timeout -k 5 900 node "$top/tests/service/scenario.mjs" ||
		{ rc=1; echo "FAIL: the scenario over TLS"; }
}

wait_ready
head -1 "$work/serve.out" # route.sh's "where" line
echo "service at $url"
seen=$(attempts)
run_scenarios
# The emulated host hung during the runs and route.sh started it again (new state, new keys):
# what failed ran against a service that was gone. Once more, against the new one.
if [ "$rc" != 0 ] && [ "$(attempts)" != "$seen" ]; then
	echo "--- route.sh started the emulated host again during the runs: once more against it"
	wait_ready
	echo "service at $url"
	run_scenarios
fi
stop_service || echo "note: the stop port did not answer"
i=0
while kill -0 "$rpid" 2>/dev/null && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
if kill -0 "$rpid" 2>/dev/null; then
	echo "FAIL: the service did not stop within 120 s"
	rc=1
else
	wait "$rpid"
	st=$?
	[ "$st" = 0 ] || { echo "FAIL: the service's side ended with status $st"; rc=1; }
fi
rpid=""
echo "--- the service's side (route.sh, start.sh, sandboxd's log)"
sed '1d; /^service-ready /d' "$work/serve.out"
cat "$work/serve.err"
[ "$rc" = 0 ] && echo "service-node: all ok"
exit $rc
