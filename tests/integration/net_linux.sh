#!/bin/sh
# The network and the egress proxy end to end (docs/network.md): a Debian guest behind its
# sandbox's namespace and proxy, against a fake internet (tests/netfake: namespaces this test
# makes, with DNS, HTTP, HTTPS and a server-first service on 203.0.113.0/24).
#
# usage: net_linux.sh SANDBOXCTL VMM KERNEL INITRD
# Where a Linux guest boots (route.sh: natively on hardware KVM, else in the emulated KVM host).
# Every check prints "ok: ..." or "FAIL: ..."; all of them run, and the test fails when one
# did. No traffic goes anywhere but the namespaces made here.
set -u
# In the emulated host sh is busybox's, whose own ip applet (run before PATH) has no netns.
[ -x /usr/bin/ip ] && ip() { /usr/bin/ip "$@"; }
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

. "$here/guest_lib.sh"

# audit_says PATTERN: the audit log of $id has a line matching PATTERN (grep -E).
audit_says() { "$ctl" net log "$id" | grep -Eq "$1"; }
# never_saw FILE PATTERN: the fake internet's log FILE has no line matching PATTERN.
never_saw() { ! grep -Eq "$2" "$1"; }

# create_refused POLICY PATTERN: create with that policy fails, saying PATTERN.
create_refused() {
	out=$("$CTL_REAL" create --image debian --policy "$1" 2>&1) && return 1
	echo "$out"
	echo "$out" | grep -q "$2"
}
probe() { "$ctl" exec "$id" -- python3 /root/net_probe.py "$@"; }
# proxy_jailed ID: the sandbox's running proxy, as /proc shows it, is jailed
# (docs/hardening.md "The proxy's jail"): filtered, unprivileged, its own uid, its own pid,
# mount, ipc and uts namespaces but the host's network one, DIR/proxy as its root.
proxy_jailed() {
	d=$SANDBOX_HOME/sandboxes/$1
	p=$(cat "$d/proxy.pid") || return 1
	u=$((0x50010000 + 0x$(echo "$1" | cut -c1-4)))
	st=/proc/$p/status
	grep -Eq '^Seccomp:[[:space:]]+2$' "$st" || { echo "Seccomp: not 2"; return 1; }
	grep -Eq '^NoNewPrivs:[[:space:]]+1$' "$st" || { echo "NoNewPrivs: not 1"; return 1; }
	for c in CapEff CapPrm CapBnd CapAmb; do
		grep -Eq "^$c:[[:space:]]+0+$" "$st" || { grep "^$c" "$st"; return 1; }
	done
	grep -Eq "^Uid:[[:space:]]+$u[[:space:]]+$u[[:space:]]+$u[[:space:]]+$u$" "$st" ||
		{ grep ^Uid "$st"; echo "not $u"; return 1; }
	for n in mnt ipc uts pid; do
		[ "$(readlink /proc/$p/ns/$n)" != "$(readlink /proc/self/ns/$n)" ] ||
			{ echo "the host's $n namespace"; return 1; }
	done
	[ "$(readlink /proc/$p/ns/net)" = "$(readlink /proc/self/ns/net)" ] ||
		{ echo "not the host's network namespace"; return 1; }
	[ "$(ls -a /proc/$p/root | sort)" = "$(ls -a "$d/proxy" | sort)" ] ||
		{ echo "root: $(ls /proc/$p/root)"; return 1; }
	[ "$(stat -c '%u %a' "$d/proxy")" = "$u 700" ] || { stat -c '%u %a' "$d/proxy"; return 1; }
}
curl_g() { "$ctl" exec "$id" -- curl -sSf --max-time 15 "$@"; }

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4 fakenet=$5
	export CTL_REAL
	ctl=$here/ctl_bounded.sh
	guest_home_ctl=$CTL_REAL
	SANDBOX_HOME=$(mktemp -d)
	export SANDBOX_HOME
	trap guest_home_cleanup EXIT
	"$CTL_REAL" images import debian --kernel "$kernel" --initrd "$initrd" --rootfs "$rootfs" ||
		fail "images import"
	fake=$SANDBOX_HOME/fake
	mkdir -p "$fake"
	"$top/tests/netfake/fakenet.sh" up "$fake" "$fakenet" || fail "fakenet.sh up"
	trap 'guest_home_cleanup; "$top/tests/netfake/fakenet.sh" down "$fake"' EXIT
	dnslog=$fake/dns.log weblogs=$fake/web10-https.log udplog=$fake/web10-udp.log
	deniedlog=$fake/web11-http.log

	# Bad policies are refused with file and line, before any VM exists.
	printf 'allow: [example.test]\nallw: [x]\n' >"$fake/bad-key.yaml"
	printf 'allow-cidr:\n  - 203.0.113.0/33\n' >"$fake/bad-cidr.yaml"
	check "a policy with an unknown key is refused with file and line" \
		create_refused "$fake/bad-key.yaml" 'bad-key.yaml:2'
	check "a policy with a malformed CIDR is refused with file and line" \
		create_refused "$fake/bad-cidr.yaml" 'bad-cidr.yaml:2'
	[ -z "$(ls "$SANDBOX_HOME/sandboxes")" ] || fail "a refused create left a sandbox"

	TEST_SECRET="Bearer sk-test-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	export TEST_SECRET
	id=$("$ctl" create --image debian --memory 384 --timeout 120 --deny-all \
		--allow example.test --allow '*.example.test' --allow www.allowed.test \
		--deny b.a.example.test \
		--allow private.test --allow-port 80 --allow-port 443 --allow-port 2222 \
		--credential api.example.test:Authorization=TEST_SECRET \
		--resolver 203.0.113.53 --ca-file "$fake/ca.pem") || fail "create (status $?)"
	echo "ok: a sandbox with a strict policy ($id)"
	"$ctl" cp "$here/net_probe.py" "$id:/root/net_probe.py" || fail "cp net_probe.py"
	"$ctl" cp "$fake/ca.pem" "$id:/root/fake-ca.pem" || fail "cp the fake internet's CA"
	"$ctl" net policy "$id" | grep -q 'example.test' || fail "net policy does not show it"
	"$ctl" net policy "$id" | grep -q "$TEST_SECRET" && fail "net policy shows the secret"

	# Allowed: HTTP, HTTPS (spliced), through HTTPS_PROXY, a non-HTTP port.
	check "HTTP to an allowed name" sh -c "$(printf '%s' \
		"'$ctl' exec $id -- curl -sS --max-time 15 http://example.test/echo | grep -qi '^host: example.test'")"
	check "HTTPS to a name under *.example.test" sh -c "'$ctl' exec $id -- curl -sS \
		--max-time 15 --cacert /root/fake-ca.pem https://a.example.test/echo | grep -qi 'host: a.example.test'"
	check "HTTPS through HTTPS_PROXY" "$ctl" exec "$id" --env HTTPS_PROXY=http://10.0.2.1:3128 \
		-- curl -sS --max-time 15 --cacert /root/fake-ca.pem https://a.example.test/echo
	check "an allowed name on an allowed non-HTTP port (server first)" \
		sh -c "'$ctl' exec $id -- python3 /root/net_probe.py tcp www.allowed.test 2222 | grep -q 'got: SSH'"
	refuse "a name not on the allow list (denied.test)" curl_g http://denied.test/echo
	check "the audit log says why denied.test was refused" audit_says '"name":"denied.test".*"decision":"deny"'
	refuse "a name on the deny list, under an allowed wildcard (b.a.example.test)" \
		curl_g http://b.a.example.test/echo
	check "the audit log says the deny list refused it" \
		audit_says '"name":"b.a.example.test".*"decision":"deny".*"rule":"deny b.a.example.test'
	refuse "*.example.test does not match example.test.evil" curl_g http://example.test.evil/echo
	check "the fake DNS never saw denied.test" never_saw "$dnslog" 'denied.test'

	# Escapes.
	refuse "HTTP to the fake internet's IP directly" curl_g http://203.0.113.10/echo
	refuse "DNS for a denied name" probe dns 10.0.2.1 denied.test
	refuse "DNS for a denied name to another resolver (the fake one)" probe dns 203.0.113.53 denied.test
	check "DNS to another resolver never reached it" never_saw "$dnslog" 'denied.test'
	refuse "UDP to the fake internet" probe udp 203.0.113.10 9999
	[ -e "$udplog" ] && check "the fake internet's UDP sink saw nothing" never_saw "$udplog" from
	refuse "ICMP to the fake internet" probe icmp 203.0.113.10
	c0=$(ip netns exec "sbx-$id" nft list counter netdev sandbox_l2 dropped | awk '/packets/ { print $2 }')
	probe raw6 >/dev/null
	probe rawether 88b5 >/dev/null
	c1=$(ip netns exec "sbx-$id" nft list counter netdev sandbox_l2 dropped | awk '/packets/ { print $2 }')
	check "raw IPv6 and other ethertypes are dropped at the tap ($c0 -> $c1)" \
		test "$((c1 - c0))" -ge 6
	refuse "a TCP SYN from another source address" probe spoofip 203.0.113.10 80
	check "an allowed SNI sent to another IP reaches the allowed host" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 --cacert /root/fake-ca.pem --resolve a.example.test:443:203.0.113.11 \
		https://a.example.test/echo | grep -qi 'host: a.example.test'"
	check "an allowed Host header sent to a denied IP does not reach it" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 -H 'Host: example.test' http://203.0.113.11/echo; true"
	check "the denied host saw none of it" never_saw "$deniedlog" 'example.test'
	refuse "CONNECT to a raw IP" curl_g -p -x http://10.0.2.1:3128 http://203.0.113.10:80/echo
	refuse "an allowed name whose DNS answer is private" curl_g http://private.test/echo
	check "the audit log says the answer was private" audit_says '"name":"private.test".*"decision":"deny"'

	# Credentials: the upstream server sees the header; the guest never does.
	check "HTTPS with a credential: the upstream got the header" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 https://api.example.test/bytes/16 >/dev/null &&
		grep -q 'Authorization: $TEST_SECRET' '$weblogs'"
	check "the guest's header is replaced, not added to" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 -H 'Authorization: guest-value' https://api.example.test/bytes/1 >/dev/null &&
		! grep -q 'guest-value' '$weblogs'"
	refuse "on a credentialed host, a Host other than the SNI" sh -c "'$ctl' exec $id -- \
		curl -sSf --max-time 15 -H 'Host: example.test' https://api.example.test/echo"
	refuse "credentials are never added to plain HTTP" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 http://api.example.test/echo | grep -q sk-test"
	# The token is never written contiguously into the guest: the memory snapshot is taken
	# before anything is searched in the guest, and the guest's search uses a bracket pattern.
	token=${TEST_SECRET#Bearer }
	"$ctl" snapshot "$id" netsnap >/dev/null || fail "snapshot"
	refuse "the secret is not in a memory snapshot of the guest" \
		grep -qa "$token" "$SANDBOX_HOME/snapshots/netsnap/memory"
	hidden="sk-tes[t]-${token#sk-test-}"
	refuse "the secret is not in the guest's environment or /proc" sh -c "'$ctl' exec $id -- \
		sh -c 'env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null' | tr '\\0' '\\n' | grep -q '$token'"
	refuse "the secret is nowhere on the guest's disk" "$ctl" exec "$id" -- \
		grep -rqs --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "$hidden" /

	# After all of that (TLS interception included) its proxy is alive and jailed.
	check "the proxy runs jailed (seccomp, no privileges, its uid, namespaces, root)" \
		proxy_jailed "$id"
	check "the snapshot kept the proxy's dns.map" test -s "$SANDBOX_HOME/snapshots/netsnap/net.dns.map"

	# Bad input to the proxy.
	refuse "garbage to the proxy is dropped" probe garbage 203.0.113.10 80
	check "and logged" audit_says '"decision":"deny"'
	check "a connection that sends nothing is closed in bounded time" sh -c "'$ctl' exec $id -- \
		python3 /root/net_probe.py idle 203.0.113.10 80 | awk '{ exit !(\$3 < 30) }'"
	probe burst 1000 203.0.113.10 80 >/dev/null
	check "after a burst of 1000 connections the proxy serves the others" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 http://example.test/echo | grep -qi 'host: example.test'"

	# Spoofing: another address on eth0, another MAC.
	refuse "a changed MAC gets nothing through" sh -c "'$ctl' exec $id -- sh -c \
		'python3 /root/net_probe.py setmac 02:53:42:00:00:99 >/dev/null;
		 curl -sS --max-time 8 http://example.test/echo; s=\$?;
		 python3 /root/net_probe.py setmac 02:53:42:00:00:02 >/dev/null; exit \$s'"
	check "and the guest's own MAC works again" sh -c "'$ctl' exec $id -- \
		curl -sS --max-time 15 http://example.test/echo | grep -qi 'host: example.test'"

	# Inbound: a port of the guest on the host's loopback.
	"$ctl" exec "$id" -- sh -c 'cd /root && (python3 -m http.server 8000 >/dev/null 2>&1 &)'
	"$ctl" exec "$id" -- python3 -c 'import socket, time
for i in range(100):
    try:
        socket.create_connection(("127.0.0.1", 8000), 1).close(); break
    except OSError: time.sleep(0.2)' || fail "the guest's web server did not start"
	check "port forwards the host's loopback to the guest" sh -c "'$ctl' port $id 8000 18000 &&
		'$fakenet' client --connect 127.0.0.1:18000 \
		--send 'GET /net_probe.py HTTP/1.0\\r\\n\\r\\n' | grep -q 'hostile guest'" 

	# Forks keep the network: their own namespace, the same addresses, the same policy.
	child=$("$ctl" fork "$id") || fail "fork"
	check "a forked child reaches an allowed name" sh -c "'$ctl' exec $child -- \
		curl -sS --max-time 15 http://example.test/echo | grep -qi 'host: example.test'"
	refuse "and not a denied one" "$ctl" exec "$child" -- curl -sS --max-time 15 http://denied.test/
	"$ctl" rm -f "$child" >/dev/null

	# The default policy (public names on 80 and 443) with an egress budget.
	b=$("$ctl" create --image debian --memory 384 --timeout 120 --egress-bytes 20000 \
		--resolver 203.0.113.53) || fail "create with --egress-bytes (status $?)"
	check "the default policy allows a public name on port 80" sh -c "'$ctl' exec $b -- \
		curl -sSf --max-time 15 http://example.test/echo | grep -qi 'host: example.test'"
	refuse "the default policy refuses another port" "$ctl" exec "$b" -- \
		python3 -c 'import socket; socket.create_connection(("www.allowed.test", 2222), 8).recv(1) or exit(1)'
	refuse "100 KB out through a 20000-byte egress budget" sh -c "'$ctl' exec $b -- sh -c \
		'head -c 100000 /dev/zero | curl -sSf --max-time 15 --data-binary @- http://example.test/echo'"
	check "the audit log says the budget ran out" sh -c "'$ctl' net log $b | grep -q 'egress budget'"
	"$ctl" rm -f "$b" >/dev/null

	# --network none: no NIC at all, no namespace, no proxy.
	n=$("$ctl" create --image debian --memory 256 --timeout 120 --network none) ||
		fail "create --network none (status $?)"
	check "--network none gives the guest no NIC" sh -c "[ \"\$('$ctl' exec $n -- ls /sys/class/net)\" = lo ]"
	check "and the host no namespace or proxy for it" sh -c "[ ! -e /run/netns/sbx-$n ] &&
		[ ! -e '$SANDBOX_HOME/sandboxes/$n/proxy.pid' ]"
	"$ctl" rm -f "$n" >/dev/null

	# A job spec's network and secrets (docs/jobspec.md, issue 14): the upstream receives the
	# secret, the guest cannot find it (env, disk), an echo of it comes back masked, and a
	# denied host fails its step with curl's status.
	JOB_SECRET="Bearer job-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	export JOB_SECRET
	jtok=${JOB_SECRET#Bearer }
	cat >"$fake/job.yaml" <<SPEC
image: debian
memory: 384
network:
  default: deny
  allow: [api.example.test, example.test]
  resolver: 203.0.113.53
secrets:
  - {host: api.example.test, header: Authorization, env: JOB_SECRET}
steps:
  - name: upstream gets it
    run: curl -sS --max-time 15 https://api.example.test/bytes/4 >/dev/null && echo sent
  - name: the guest cannot find it
    run: |
      t="job-\$(echo ${jtok#job-} | sed 's/^\(.\)/[\1]/')"
      (env; cat /proc/*/environ 2>/dev/null) | tr '\\0' '\\n' | grep -c "\$t" || true
      grep -rlsq "\$t" /etc /root /tmp /var /home /run /src 2>/dev/null && echo on-disk || echo not-on-disk
  - name: an echo of it
    run: curl -sS --max-time 15 https://api.example.test/echo
  - name: a denied host
    run: curl -sSf --max-time 10 http://denied.test/echo
  - run: echo never
SPEC
	SANDBOX_CA_FILE=$fake/ca.pem timeout 600 "$CTL_REAL" run --junit "$fake/job.xml" \
		"$fake/job.yaml" >"$fake/job.out" 2>&1
	jst=$?
	check "a job's secret reaches the upstream" sh -c "grep -q '^sent\$' '$fake/job.out' &&
		grep -q 'Authorization: $JOB_SECRET' '$weblogs'"
	check "an upstream's echo of it is masked in the job's output and report" sh -c "
		grep -qi '^authorization: \\*\\*\\*' '$fake/job.out' && ! grep -q '$jtok' '$fake/job.out' '$fake/job.xml'"
	check "the job's guest cannot find its secret (env, the disk's writable trees)" sh -c "
		grep -qx 0 '$fake/job.out' && grep -qx not-on-disk '$fake/job.out'"
	check "a denied host fails its step and the job (curl's status $jst)" sh -c "
		[ $jst != 0 ] && grep -q '<== \\[4/5\\] a denied host: failed (status $jst)' '$fake/job.out' &&
		! grep -qx never '$fake/job.out'"

	# A dead proxy means no network, never an open one.
	kill "$(cat "$SANDBOX_HOME/sandboxes/$id/proxy.pid")"
	sleep 1
	refuse "with its proxy dead the guest reaches nothing" curl_g --max-time 8 http://example.test/echo

	"$ctl" rm -f "$id" >/dev/null
	[ ! -e "/run/netns/sbx-$id" ] || soft_fail "rm left the namespace"
	[ ! -e "$SANDBOX_HOME/sandboxes/$id" ] ||
		soft_fail "rm left the sandbox's directory: $(ls -R "$SANDBOX_HOME/sandboxes/$id")"
	checks_end network
	exit 0
}

if [ "${1:-}" = --inner ]; then
	shift
	inner "$@"
fi

ctl=$1 vmm=$2 kernel=$3 initrd=$4
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
build=$(cd "$(dirname "$vmm")/.." && pwd)
rootfs=$("$top/guest/image/debian.sh") || fail "cannot build the Debian image"
fakenet=$build/tests/netfake/fakenet
exec "$here/route.sh" "$build" --linux --timeout 900 --memory 3072 --add "$here" --add "$top/tests/netfake" \
	--add "$(dirname "$rootfs")" -- "$0" --inner "$ctl" "$kernel" "$initrd" "$rootfs" "$fakenet"
