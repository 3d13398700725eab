#!/bin/sh
# Our Python SDK's remote mode (sdk/python/tests/test_remote.py) against sandboxd on real
# guests (issue 30: "Our Python SDK's remote mode passes the same subset" as the LangSmith JS
# scenario). Everything runs where Linux guests boot (route.sh: natively on hardware KVM, else
# in the emulated host, which carries python3 and pytest): the busybox image imported into a
# fresh home, sandboxd started by tests/service/start.sh (the starter service_node.sh uses,
# with two workspaces: py1, and py2 whose quota is vcpus=1) on that host's loopback, pytest
# against it, then sandboxd stopped, which must end on SIGTERM leaving no VMM.
#
# usage: sdk_remote.sh SANDBOXD SANDBOXCTL VMM KERNEL INITRD
# Exit: 0 pass, 1 fail, 77 skip (no sandboxd built, no guest kernel).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1-}" = --inner ]; then
	. "$here/check_lib.sh"
	sandboxd=$2 ctl=$3 kernel=$4 initrd=$5 rootfs=$6
	python3 -c 'import pytest' 2>/dev/null || fail "no pytest for $(command -v python3)"
	work=$(mktemp -d)
	spid=""
	# shellcheck disable=SC2317 # called from the EXIT trap
	inner_cleanup() {
		if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
			kill -TERM "$spid" 2>/dev/null
			wait "$spid" 2>/dev/null
		fi
		rm -rf "$work"
	}
	trap inner_cleanup EXIT
	SANDBOX_HOME=$work/home "$ctl" images import busybox --kernel "$kernel" --initrd "$initrd" \
		--rootfs "$rootfs" >&2 || fail "images import"
	ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
	# shellcheck disable=SC2086 # three words
	set -- $ports
	port=$1 opport=$2 stopport=$3
	# (sandboxd finds sandbox-proxy beside build/tools/<prog>/ only, not from build/sandboxd/)
	SANDBOX_PROXY=$(cd "$(dirname "$sandboxd")/.." && pwd)/proxy/sandbox-proxy
	export SANDBOX_PROXY
	SERVICE_LOG=1 sh "$top/tests/service/start.sh" "$sandboxd" --fresh "$work/home/images" \
		--workspace py1 --workspace py2,vcpus=1 --stop-on "127.0.0.1:$stopport" --deadline 1500 \
		-- --listen "127.0.0.1:$port" --operator "127.0.0.1:$opport" --default-image busybox \
		>"$work/ready" 2>"$work/service.err" &
	spid=$!
	i=0 ready=""
	while [ $i -lt 600 ] && kill -0 "$spid" 2>/dev/null; do
		ready=$(grep -m1 '^service-ready ' "$work/ready")
		[ -n "$ready" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$ready" ]; then
		cat "$work/service.err" >&2
		fail "sandboxd did not say it listens within 60 s"
	fi
	field() { printf '%s\n' "$ready" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
	echo "service at $(field url)"
	rc=0
	SANDBOX_API_URL=$(field url) SANDBOX_API_KEY=$(field key.py1) SANDBOX_API_KEY2=$(field key.py2) \
		PYTHONDONTWRITEBYTECODE=1 timeout -k 5 1200 python3 -m pytest -v --color=no \
		-p no:cacheprovider -rs "$top/sdk/python/tests/test_remote.py" || rc=$?
	python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10).close()' \
		"$stopport" || echo "note: the stop port did not answer"
	wait "$spid"
	st=$?
	spid=""
	if [ "$rc" != 0 ] || [ "$st" != 0 ]; then
		echo "--- the service's side (start.sh, the end of sandboxd's log)"
		cat "$work/service.err"
	fi
	[ "$rc" = 0 ] || fail "the SDK's remote tests (status $rc)"
	[ "$st" = 0 ] || fail "sandboxd did not end cleanly on SIGTERM (start.sh: $st)"
	echo "sdk-remote: all ok"
	exit 0
fi

sandboxd=$1 ctl=$2 vmm=$3 kernel=$4 initrd=$5
[ -x "$sandboxd" ] || { echo "SKIP: sandboxd is not built ($sandboxd)"; exit 77; }
[ -e "$kernel" ] || { echo "SKIP: guest kernel $kernel not built (run tools/dev setup)"; exit 77; }
build=$(cd "$(dirname "$vmm")/.." && pwd)
rootfs=$("$top/guest/image/busybox.sh" "$build/guest/sandbox-init") ||
	{ echo "FAIL: cannot build the busybox image"; exit 1; }
exec "$here/route.sh" "$build" --linux --timeout 1500 --memory 3072 --add "$here" \
	--add "$top/tests/service" --add "$top/sdk/python" --add "$(dirname "$rootfs")" -- \
	"$0" --inner "$sandboxd" "$ctl" "$kernel" "$initrd" "$rootfs"
