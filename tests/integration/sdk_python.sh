#!/bin/sh
# The Python SDK's pytest suite (sdk/python/tests) against real sandboxes on the busybox
# image: create, streamed and background runs, files, snapshot, restore, fork, pause, resume,
# suspend, the asyncio flavour and the errors. sandbox_guest.sh decides where the guests boot
# (in the emulated host on kvm-pvm, which carries python3 and pytest) and runs --inner there.
#
# usage: sdk_python.sh SANDBOXCTL VMM KERNEL INITRD
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

. "$here/guest_lib.sh"

if [ "${1-}" = --inner ]; then
	guest_home "$2" "$3" "$4" "$5"
	python3 -c 'import pytest' 2>/dev/null || fail "no pytest for $(command -v python3)"
	# Each sandboxctl call of the SDK is bounded (ctl_bounded.sh): a guest that hangs in the
	# emulated host fails the run (and route.sh retries it) instead of stalling it.
	CTL_REAL=$2 CTL_DEADLINE=180 SANDBOXCTL=$here/ctl_bounded.sh SANDBOX_SDK_IMAGE=busybox \
		PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -v --color=no -p no:cacheprovider -rs \
		"$top/sdk/python/tests/test_live.py" || fail "the SDK's tests (status $?)"
	exit 0
fi
exec "$here/sandbox_guest.sh" "$0" "$@"
