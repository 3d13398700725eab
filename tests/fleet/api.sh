#!/bin/sh
# The fleet's API on real guests (tests/fleet/api_checks.py): three hosts as network
# namespaces, each running `sandboxd serve --fleet`, and a three-node NATS cluster, made and
# removed by the checks where Linux guests boot (sandbox_guest.sh: natively on hardware KVM,
# else the whole topology inside one emulated host). sandboxd is linked dynamically
# (libwebsockets, jansson, libcurl, libnats): its libraries go in beside it with their loader,
# and nats-server (Debian's) too. An emulated host of its own (two vCPUs, 6 GiB): the shared
# pool's, one vCPU, stopped under three hosts' guests, NATS and Swift.
#
# usage: api.sh SANDBOXD SANDBOXCTL VMM KERNEL INITRD
# With FLEET_BENCH=1: tools/bench/fleet_restore.py (bench fleet's restore figures) instead.
# FLEET_PART=node: the Node scenario only; api: every other check; unset: both, on one topology.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1-}" = --inner ]; then
	fleet_dir=$here
	here=$top/tests/integration # (guest_lib.sh finds check_lib.sh by it)
	. "$here/guest_lib.sh"
	build=$(cd "$(dirname "$2")/../.." && pwd)
	guest_home "$2" "$3" "$4" "$5"
	export SANDBOX_VMM="$build/vmm/sandbox-vmm" SANDBOX_PROXY="$build/proxy/sandbox-proxy"
	# In the emulated host, each VMM pinned to one of its CPUs (/devhost/sandbox-vmm): one
	# whose vCPU thread moves between L1's CPUs now and then takes L1's kernel down with it
	# (QEMU's emulation of nested SVM; docs/hosts.md, "The emulated host's triple faults")
	[ "${DEVHOST:-}" = 1 ] && [ -x /devhost/sandbox-vmm ] && export SANDBOX_VMM=/devhost/sandbox-vmm
	set -- "$FLEET_SANDBOXD"
	if ! "$FLEET_SANDBOXD" keys list >/dev/null 2>&1; then
		set -- "$FLEET_LIBS/ld-linux-x86-64.so.2" --library-path "$FLEET_LIBS" "$FLEET_SANDBOXD"
	fi
	# Swift's objects on a file system with user xattrs: /var/tmp where it has them (ext4 on
	# our hosts), else (the emulated host: tmpfs on Linux 6.1) an ext2 file system of its own
	# in a sparse file there, loop-mounted (the input disk has them but ~20 MB free)
	[ -x /usr/bin/swift-proxy-server ] || fail "no Swift here (tools/dev setup installs it)"
	swift_dir=$(mktemp -d /var/tmp/fleet-swift.XXXXXX)
	trap 'guest_home_cleanup; umount "$swift_dir" 2>/dev/null; rm -rf "$swift_dir" "$swift_dir.img"' EXIT
	if ! python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.fleet", b"1")' \
		"$swift_dir" 2>/dev/null; then
		truncate -s 2G "$swift_dir.img"
		mke2fs -F "$swift_dir.img" >/dev/null || fail "cannot make Swift's file system"
		modprobe loop 2>/dev/null || true
		mount -o loop "$swift_dir.img" "$swift_dir" || fail "cannot mount Swift's file system"
	fi
	checks=$fleet_dir/api_checks.py
	[ -z "${FLEET_BENCH:-}" ] || checks=$top/tools/bench/fleet_restore.py
	python3 "$checks" --images "$SANDBOX_HOME/images" --bin "$FLEET_LIBS/bin" \
		--ctl "$guest_home_ctl" --swift-dir "$swift_dir" -- "$@" || fail "the fleet's checks"
	exit 0
fi

sandboxd=$1
shift
[ -x "$sandboxd" ] || { echo "SKIP: sandboxd is not built"; exit 77; }
nats=$(command -v nats-server) || { echo "SKIP: no nats-server (tools/dev setup installs it)"; exit 77; }
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
ldd "$sandboxd" | awk '/=> \// { print $3 } /ld-linux/ { print $1 }' |
	sort -u | while read -r l; do cp -L "$l" "$libs/"; done
mkdir -p "$libs/bin"
cp -L "$nats" "$libs/bin/"
# The LangSmith JS client's scenario (tests/service) runs in there too: node and the client
# (tools/dev setup fetches it) go in at their paths
node=$(command -v node) || node=""
modules=$("$top/tools/dev" node-paths 2>/dev/null | sed -n 's/^with_ws=\([^ ]*\) .*/\1/p')
node_add=""
if [ -n "$node" ] && [ -d "$modules" ] && [ "${FLEET_PART:-}" != api ]; then
	node=$(readlink -f "$node")
	node_add="--add $node --add $modules --add $top/tests/service --add $top/docs/api.md -e FLEET_NODE=$node -e FLEET_NODE_MODULES=$modules"
fi
FLEET_SANDBOXD=$sandboxd FLEET_LIBS=$libs \
	SANDBOX_GUEST_DEVHOST="--own-l1 --timeout 1500 --memory 6144 --add $libs --add $here --add $top/tools/bench $node_add -e FLEET_SANDBOXD=$sandboxd -e FLEET_LIBS=$libs -e FLEET_BENCH=${FLEET_BENCH:-} -e FLEET_PART=${FLEET_PART:-}" \
	"$top/tests/integration/sandbox_guest.sh" "$0" "$@"
