#!/bin/sh
# Run a command inside the emulated KVM host for a test, where this host needs one.
#
# usage: devhost_retry.sh BUILD_DIR [devhost run options] -- CMD ARGS...
# Skips (77) with the reason when the emulated host's image is not built. The emulated host
# itself hangs now and then (docs/hosts.md: ~2 boots in 90, not always before its own health
# check), so a run cut by devhost's timeout (124: L1 hung or went silent) is retried, as is
# one whose command says it failed in the emulated host (75: a nested guest hung, see
# ctl_bounded.sh and cgroup_payload.c, or any failure of the guest tests there, see
# guest_lib.sh). At most three attempts, and a 75 only once: a second 75 fails the test (a
# real bug fails twice), while an L1 hang says nothing of our code (CI once lost cgroup-v2 to
# a stalled nested guest and then a hung L1 on the retry). Any other status is CMD's. The
# caller's own timeout (expect.sh's) bounds all the attempts together.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
shift
image=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/devhost/current
[ -e "$image/vmlinuz" ] || { echo "SKIP: kvm-pvm host and no emulated-host image (run tools/dev setup)"; exit 77; }
failed75=0
for attempt in 1 2 3; do
	"$top/tools/devhost/run" --timeout 150 --build "$build" "$@"
	st=$?
	case $st in
	124) ;;
	75) [ "$failed75" = 0 ] || exit 75; failed75=1 ;;
	*) exit "$st" ;;
	esac
	[ "$attempt" = 3 ] && exit "$st"
	echo "devhost_retry.sh: attempt $attempt: the emulated host timed out or hung (124), or the run failed there (75): exit $st; trying again"
done
