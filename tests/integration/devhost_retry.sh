#!/bin/sh
# Run a command inside the emulated KVM host for a test, where this host needs one.
#
# usage: devhost_retry.sh BUILD_DIR [devhost run options] -- CMD ARGS...
# Skips (77) with the reason when the emulated host's image is not built. The emulated host
# itself hangs now and then (docs/hosts.md: ~2 boots in 90, not always before its own health
# check), so a run cut by devhost's timeout (124) is retried once, as is one whose command
# says it failed in the emulated host (75: a nested guest hung, see ctl_bounded.sh, or any
# failure of the guest tests there, see guest_lib.sh); any other status is CMD's, and a second
# 75 fails the test.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
shift
image=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/devhost/current
[ -e "$image/vmlinuz" ] || { echo "SKIP: kvm-pvm host and no emulated-host image (run tools/dev setup)"; exit 77; }
for attempt in 1 2; do
	"$top/tools/devhost/run" --timeout 150 --build "$build" "$@"
	st=$?
	{ [ "$st" = 124 ] || [ "$st" = 75 ]; } && [ "$attempt" = 1 ] || exit "$st"
	echo "devhost_retry.sh: the emulated host timed out or the run failed there; retrying once"
done
