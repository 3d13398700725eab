#!/bin/sh
# tests/netfake/fakenet.sh up DIR [FAKENET] | down DIR: the fake internet of the network tests.
#
# up: a namespace "fakeinet" joined to the current namespace by a veth pair (here fi-host,
# 203.0.113.1/24; there fi-inet), holding the servers below, started with their logs, pidfiles
# and certificates in DIR (made if missing). Prints nothing on success; DIR/env then holds the
# addresses as shell variables (FAKENET_DNS=203.0.113.53:53 ...) for tests to source.
#   203.0.113.53   DNS, UDP 53 (zone DIR/zone, log DIR/dns.log)
#   203.0.113.10   web: HTTP 80, HTTPS 443, banner on 2222, UDP echo on 9999 (logs DIR/web10-*.log)
#   203.0.113.11   a second web host (denied.test, ...): the same services (DIR/web11-*.log)
#   203.0.113.12   a host with no name (for CIDR rules): HTTP 80, HTTPS 443 (cert for the IP)
# FAKENET is the fakenet binary (default: $FAKENET, else the build's, else fakenet on PATH).
# down: stops the servers (their pidfiles in DIR), deletes the namespace (and so the veth
# pair); DIR and its logs stay. One fake internet per host at a time. Needs root and iproute2.
# Nothing here sends traffic anywhere but the addresses it creates.
set -eu
# In the emulated host sh is busybox's, whose ip applet (run before PATH) has no netns.
[ -x /usr/bin/ip ] && ip() { /usr/bin/ip "$@"; }

NS=fakeinet
HOST_IF=fi-host
INET_IF=fi-inet
here=$(cd "$(dirname "$0")" && pwd)

die() {
	echo "fakenet.sh: $*" >&2
	exit 1
}

# The zone: names the tests use, and what each stands for.
write_zone() {
	cat <<'EOF'
# tests/netfake/fakenet.sh: NAME A IPV4
example.test A 203.0.113.10
a.example.test A 203.0.113.10
b.a.example.test A 203.0.113.10
api.example.test A 203.0.113.10
www.allowed.test A 203.0.113.10
multi.example.test A 203.0.113.10
multi.example.test A 203.0.113.12
denied.test A 203.0.113.11
example.test.evil A 203.0.113.11
x.evil.test A 203.0.113.11
# names whose answers the proxy must refuse unless a CIDR rule allows them
private.test A 10.1.2.3
loop.test A 127.0.0.1
linklocal.test A 169.254.169.254
cgnat.test A 100.64.0.1
hostaddr.test A 203.0.113.1
EOF
}
WEB10_NAMES="example.test a.example.test b.a.example.test api.example.test www.allowed.test multi.example.test"
WEB11_NAMES="denied.test example.test.evil x.evil.test"
WEB12_NAMES="203.0.113.12"

# start NAME CMD...: a server in the namespace; waits for its pidfile (written once it listens).
start() {
	name=$1
	shift
	rm -f "$dir/$name.pid"
	ip netns exec $NS "$fakenet" "$@" --log "$dir/$name.log" --pidfile "$dir/$name.pid" \
		</dev/null >>"$dir/$name.err" 2>&1 &
	i=0
	while [ ! -s "$dir/$name.pid" ]; do
		kill -0 $! 2>/dev/null || die "$name did not start: $(tail -3 "$dir/$name.err")"
		i=$((i + 1))
		[ $i -lt 200 ] || die "$name did not start within 10 s"
		sleep 0.05
	done
}

# web PREFIX IP NAMES: HTTP, HTTPS (a certificate per name, chosen by SNI), banner.
web() {
	start "$1-http" http --listen "$2:80"
	certs=
	for n in $3; do
		certs="$certs --cert $dir/certs/$n.pem --key $dir/certs/$n.key"
	done
	# shellcheck disable=SC2086 # word lists
	start "$1-https" https --listen "$2:443" $certs
	[ "$4" = nobanner ] || start "$1-banner" banner --listen "$2:2222" --banner "SSH-2.0-fakenet-$1"
}

up() {
	[ "$(id -u)" = 0 ] || die "needs root"
	if ip netns list 2>/dev/null | grep -q "^$NS\b"; then
		die "namespace $NS exists: another fake internet is up (fakenet.sh down DIR, or ip netns del $NS)"
	fi
	fakenet=${3:-${FAKENET:-}}
	if [ -z "$fakenet" ]; then
		top=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || true)
		if [ -n "$top" ] && [ -x "$top/build/tests/netfake/fakenet" ]; then
			fakenet=$top/build/tests/netfake/fakenet
		else
			fakenet=$(command -v fakenet) || die "no fakenet binary (give it as the 3rd argument)"
		fi
	fi
	[ -x "$fakenet" ] || die "not executable: $fakenet"
	mkdir -p "$dir/certs"
	write_zone >"$dir/zone"
	# shellcheck disable=SC2086 # word lists
	"$fakenet" mkcert --ca-dir "$dir/certs" --name $WEB10_NAMES $WEB11_NAMES $WEB12_NAMES
	cp "$dir/certs/ca.pem" "$dir/ca.pem"

	ip netns add $NS
	# From here on a failure takes everything down again.
	trap 'down >/dev/null 2>&1' EXIT
	ip link add $HOST_IF type veth peer name $INET_IF netns $NS
	ip addr add 203.0.113.1/24 dev $HOST_IF
	ip link set $HOST_IF up
	ip -n $NS link set lo up
	for a in 53 10 11 12; do
		ip -n $NS addr add 203.0.113.$a/24 dev $INET_IF
	done
	ip -n $NS link set $INET_IF up
	ip -n $NS route add default via 203.0.113.1
	# The addresses must be usable at once (no duplicate address detection on IPv4, but the
	# link takes a moment to be up on both ends).
	i=0
	until ip -n $NS link show $INET_IF | grep -q 'state UP' &&
		ip link show $HOST_IF | grep -q 'state UP'; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "veth did not come up"
		sleep 0.05
	done

	start dns dns --listen 203.0.113.53:53 --zone "$dir/zone"
	web web10 203.0.113.10 "$WEB10_NAMES" banner
	web web11 203.0.113.11 "$WEB11_NAMES" banner
	web web12 203.0.113.12 "$WEB12_NAMES" nobanner
	start web10-udp udp --listen 203.0.113.10:9999
	cat >"$dir/env" <<EOF
FAKENET_NS=$NS
FAKENET_HOST_ADDR=203.0.113.1
FAKENET_DNS=203.0.113.53:53
FAKENET_WEB=203.0.113.10
FAKENET_WEB_DENIED=203.0.113.11
FAKENET_WEB_RAW=203.0.113.12
FAKENET_CIDR=203.0.113.0/24
FAKENET_CA=$dir/ca.pem
FAKENET_DIR=$dir
FAKENET_BIN=$fakenet
EOF
	trap - EXIT
}

down() {
	for p in "$dir"/*.pid; do
		[ -s "$p" ] || continue
		pid=$(cat "$p")
		kill -TERM "$pid" 2>/dev/null || true
	done
	for p in "$dir"/*.pid; do
		[ -s "$p" ] || continue
		pid=$(cat "$p")
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do
			i=$((i + 1))
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$p"
	done
	# Deleting the namespace deletes fi-inet, and with it its peer fi-host.
	ip netns del $NS 2>/dev/null || true
	ip link del $HOST_IF 2>/dev/null || true
	i=0
	while ip link show $HOST_IF >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "$HOST_IF still exists"
		sleep 0.05
	done
}

[ $# -ge 2 ] || die "usage: fakenet.sh up DIR [FAKENET] | down DIR"
mkdir -p "$2"
dir=$(cd "$2" && pwd)
case $1 in
up) up "$@" ;;
down) down ;;
*) die "usage: fakenet.sh up DIR [FAKENET] | down DIR" ;;
esac
