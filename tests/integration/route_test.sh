#!/bin/sh
# The routing rule itself (route.sh): with /dev/kvm hidden (tools/hide-kvm), as on our machines
# that have none, a payload test runs in the emulated host and passes; the same test with a
# guest that fails there fails; and a guest test whose command the emulated host cannot even
# start fails rather than skips. The same on every machine.
#
# usage: route_test.sh BUILD
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ -e /dev/kvm ] && exec "$top/tools/hide-kvm" "$0" "$@"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- its output ---"; cat "$out"; exit 1; }
vmm=$build/vmm/sandbox-vmm

"$here/route.sh" "$build" --timeout 120 -- "$here/expect.sh" --timeout 100 \
	--grep '^hello from payload' -- "$vmm" --payload "$build/tests/guests/payload-hello" >"$out" 2>&1
st=$?
[ "$st" = 0 ] || fail "payload-hello with /dev/kvm hidden: status $st, expected 0"
grep -q '^route: where=emulated (no usable /dev/kvm here)$' "$out" || fail "it did not say it ran emulated"
grep -q '^hello from payload' "$out" || fail "the guest's line did not come back"
echo "ok: with /dev/kvm hidden payload-hello ran in the emulated host and passed"

# The same check of a guest that triple-faults: expected to say hello, it must fail.
"$here/route.sh" "$build" --timeout 120 -- "$here/expect.sh" --timeout 100 \
	--grep '^hello from payload' -- "$vmm" --payload "$build/tests/guests/payload-fault" >"$out" 2>&1
st=$?
[ "$st" = 1 ] || fail "a failing guest with /dev/kvm hidden: status $st, expected 1"
grep -q '^route: where=emulated' "$out" || fail "the failing guest did not run emulated"
grep -q 'guest triple fault on vcpu0' "$out" || fail "the failing guest's own error did not come back"
echo "ok: the same test of a guest that fails there fails (status 1, its error shown)"

# A command the emulated host cannot run is a failure (127), not a skip.
"$here/route.sh" "$build" --timeout 60 -- /nonexistent/test-command >"$out" 2>&1
st=$?
[ "$st" = 127 ] || fail "a missing command in the emulated host: status $st, expected 127"
echo "ok: a command missing in the emulated host fails with 127"
