#!/bin/sh
# SIGTERM stops a running guest cleanly: exit status 7 and a one-line reason, within seconds.
# usage: signal.sh VMM PAYLOAD_SPIN
set -u
. "$(dirname "$0")/check_lib.sh"
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: /dev/kvm is not usable here"; exit 77; }
vmm=$1 payload=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$vmm" --payload "$payload" --cpus 2 --timeout 30 >"$out" 2>&1 &
pid=$!
# Wait (bounded) for the guest to run before signalling it.
i=0
until grep -q '^spin: running' "$out" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM $pid
wait $pid
st=$?
cat "$out"
[ "$st" = 7 ] || fail "exit status $st, expected 7"
grep -q 'stopped by signal 15' "$out" || fail "no reason line"
echo "ok: SIGTERM gave status 7"
