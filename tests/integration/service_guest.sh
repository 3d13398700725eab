#!/bin/sh
# sandboxd on real guests, the checks that kill and restart the daemon (tests/service/
# service_checks.py: kill -9 during a stream and during a create, two clients on one command,
# SIGTERM's 1001, a revoked key's WebSocket, idle stop with its memory given back and the
# wake). sandbox_guest.sh decides where the guests boot (in the emulated host on kvm-pvm and
# without /dev/kvm); sandboxd is linked dynamically (libwebsockets, jansson, libcurl), and the
# emulated host has none of its libraries: they go in beside it, with their loader.
#
# usage: service_guest.sh SANDBOXD SANDBOXCTL VMM KERNEL INITRD
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ "${1-}" = --inner ]; then
	. "$here/guest_lib.sh"
	build=$(cd "$(dirname "$2")/../.." && pwd)
	# The state on a disk, not tmpfs (/tmp is tmpfs in the emulated host and on many hosts):
	# a stopped box's memory must go to a file that is not RAM for the idle check to see it
	# given back. Under the build dir (the emulated host's copy of it is a disk; writes are
	# discarded with it).
	TMPDIR=$build/service-tmp.$$
	mkdir -p "$TMPDIR"
	export TMPDIR
	guest_home "$2" "$3" "$4" "$5"
	trap 'guest_home_cleanup; rm -rf "$TMPDIR"' EXIT
	export SANDBOX_VMM="$build/vmm/sandbox-vmm" SANDBOX_PROXY="$build/proxy/sandbox-proxy"
	# In the emulated host, each VMM pinned to one of its CPUs (/devhost/sandbox-vmm): one
	# whose vCPU thread moves between L1's CPUs now and then takes L1's kernel down with it
	# (QEMU's emulation of nested SVM; docs/hosts.md, "The emulated host's triple faults")
	[ "${DEVHOST:-}" = 1 ] && [ -x /devhost/sandbox-vmm ] && export SANDBOX_VMM=/devhost/sandbox-vmm
	PATH=$SERVICE_LIBS/bin:$PATH
	echo "service_guest: mke2fs is $(command -v mke2fs) ($(mke2fs -V 2>&1 | head -1))"
	set -- "$SERVICE_SANDBOXD"
	if ! "$SERVICE_SANDBOXD" keys list >/dev/null 2>&1; then
		set -- "$SERVICE_LIBS/ld-linux-x86-64.so.2" --library-path "$SERVICE_LIBS" "$SERVICE_SANDBOXD"
	fi
	python3 "$top/tests/service/service_checks.py" "$SANDBOX_HOME" -- "$@" ||
		fail "the service's checks"
	exit 0
fi

sandboxd=$1
shift
[ -x "$sandboxd" ] || { echo "SKIP: sandboxd is not built"; exit 77; }
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
mke2fs=$(command -v mke2fs) || { echo "SKIP: no mke2fs (e2fsprogs)"; exit 77; }
{ ldd "$sandboxd"; ldd "$mke2fs"; } | awk '/=> \// { print $3 } /ld-linux/ { print $1 }' |
	sort -u | while read -r l; do cp -L "$l" "$libs/"; done
# e2fsprogs' mke2fs for the image import of a snapshot from a registry (the emulated host has
# busybox's, without -t or -d), run through the loader beside its libraries
mkdir -p "$libs/bin"
cp -L "$mke2fs" "$libs/mke2fs.real"
printf '#!/bin/sh\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s" "%s/mke2fs.real" "$@"\n' \
	"$libs" "$libs" "$libs" >"$libs/bin/mke2fs"
chmod 755 "$libs/bin/mke2fs"
SERVICE_SANDBOXD=$sandboxd SERVICE_LIBS=$libs \
	SANDBOX_GUEST_DEVHOST="--timeout 900 --memory 4096 --add $libs --add $top/tests/service -e SERVICE_SANDBOXD=$sandboxd -e SERVICE_LIBS=$libs -e SERVICE_ONLY=${SERVICE_ONLY:-}" \
	"$here/sandbox_guest.sh" "$0" "$@"
