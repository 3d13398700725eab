#!/bin/sh
# sandbox-vmm --lifeline FD: the VM stops (status 7, one line saying why) within seconds of the
# last writer of that pipe going away, even one killed with SIGKILL; while the writer lives
# the guest runs on. The pipe is a FIFO here, the way sandboxctl run's is a pipe(2).
# usage: lifeline.sh VMM PAYLOAD_SPIN
set -u
. "$(dirname "$0")/check_lib.sh"
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: /dev/kvm is not usable here"; exit 77; }
vmm=$1 payload=$2
# ms: milliseconds of uptime (busybox's date, in the emulated host, has no %N).
ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
tmp=$(mktemp -d)
writer=
trap '[ -n "$writer" ] && kill -KILL $writer 2>/dev/null; rm -rf "$tmp"' EXIT
mkfifo "$tmp/lifeline"
# Opening the FIFO blocks each side until the other opens it: both start in the background.
"$vmm" --payload "$payload" --timeout 60 --lifeline 3 >"$tmp/out" 2>&1 3<"$tmp/lifeline" &
pid=$!
sleep 600 >"$tmp/lifeline" &
writer=$!
i=0
until grep -q '^spin: running' "$tmp/out" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
grep -q '^spin: running' "$tmp/out" || { cat "$tmp/out"; fail "the guest did not start"; }
sleep 1
kill -0 $pid 2>/dev/null || { cat "$tmp/out"; fail "the VMM stopped while its creator lived"; }
t0=$(ms)
kill -KILL $writer
wait $writer 2>/dev/null
writer=
wait $pid
st=$?
took=$(($(ms) - t0))
cat "$tmp/out"
[ "$st" = 7 ] || fail "exit status $st, expected 7"
grep -q 'the creator went away (EOF on --lifeline 3): stopped' "$tmp/out" ||
	fail "no reason line"
[ "$took" -lt 5000 ] || fail "the VMM took $took ms to stop"
echo "ok: the writer's SIGKILL stopped the VMM in $took ms with status 7"
