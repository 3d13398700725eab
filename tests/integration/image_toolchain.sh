#!/bin/sh
# The default image's userland in a real guest (issue 16): `sandboxctl run` of
# tests/integration/toolchain/job.yaml on the Debian image, with no network. Its steps compile
# and run a C program (libm) and a C++17 one, run `make` on a project with a header of its
# own, make a Python venv and pip-install a local package into it (and then system-wide),
# and run a Node.js script that requires a local npm package installed offline; a first
# step checks that the tools an agent or a CI job reaches for are on PATH, and HOME, the
# locale and the time zone. Each step's line of output is checked here.
#
# usage: image_toolchain.sh SANDBOXCTL VMM KERNEL INITRD
# Where a Linux guest boots (route.sh: natively on hardware KVM, else in the emulated KVM
# host); the script calls itself there with --inner.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

. "$here/guest_lib.sh"

inner() {
	ctl=$1 kernel=$2 initrd=$3 rootfs=$4
	guest_home_ctl=$ctl # guest_home_cleanup removes sandboxes with it
	SANDBOX_HOME=$(mktemp -d)
	export SANDBOX_HOME
	trap guest_home_cleanup EXIT
	"$ctl" images import debian --kernel "$kernel" --initrd "$initrd" --rootfs "$rootfs" ||
		fail "images import"
	out=$SANDBOX_HOME/run.out
	start=$(date +%s)
	timeout 1600 "$ctl" run "$here/toolchain/job.yaml" >"$out" 2>&1
	st=$?
	echo "the job took $(($(date +%s) - start)) s (status $st)"
	[ "$st" = 0 ] || fail "the job failed with status $st: $(cat "$out")"
	for want in \
		'tools: all on PATH' \
		'env: home=/root lang=C.UTF-8 tz=UTC locale=UTF-8' \
		'c: hello sandbox, strlen=7 sqrt2=1.4142' \
		'c++: sum=55 upper=TOOLCHAIN' \
		'make: gcd(84, 36) = 12' \
		'python: ensurepip 23.0.1' \
		'python: hello from greet in /tmp/venv' \
		'python: system-wide in /usr/local/lib/python3.11/dist-packages/greet/__init__.py' \
		'node: HELLO! sum=10 major=18 platform=linux' \
		'==> job passed'; do
		if grep -qF -- "$want" "$out"; then
			echo "ok: $want"
		else
			soft_fail "no line '$want'"
		fi
	done
	if grep -q 'leaked out of the venv' "$out"; then
		soft_fail "the venv's package is importable outside it"
	fi
	grep -E '^<== ' "$out"
	[ "$check_failed" = 0 ] || cat "$out"
	checks_end toolchain
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
exec "$here/route.sh" "$build" --linux --timeout 900 --memory 3072 --add "$here" \
	--add "$(dirname "$rootfs")" -- "$0" --inner "$ctl" "$kernel" "$initrd" "$rootfs"
