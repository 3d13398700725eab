#!/bin/sh
# sandboxctl's defences against a guest that does not play along, with the real agent and VMM
# on the busybox image (issue 13; the same defences against a scripted hostile agent, natively:
# ctl_hostile.py):
# - cp out of a file that grows while it is read stops at the size STAT gave: status 1, one
#   line saying so, nothing left under the destination's name;
# - exec of a command that ignores SIGTERM ends 5 s after the SIGTERM with 143, and the
#   command is gone from the guest;
# - create --ttl: ls shows what is left;
# - a `sandboxctl run` killed with SIGKILL takes its VMM with it (--lifeline): the console says
#   the creator went away.
#
# usage: ctl_guest.sh SANDBOXCTL VMM KERNEL INITRD (sandbox_guest.sh runs it with --inner)
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh # a hung step fails with status 137 instead of stalling
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	id=$("$ctl" create --image busybox --memory 256 --timeout 120 --network none --ttl 1h) ||
		fail "create (status $?)"
	"$ctl" ls | grep -Eq "^$id .* (1h00m|59m[0-9]{2}s)\$" || { "$ctl" ls; fail "ls does not show the ttl"; }

	# A file that grows faster than the copy reads it: 1 MiB when STAT looks, 64 MiB later.
	"$ctl" exec "$id" -- sh -c 'head -c 1048576 /dev/zero >/tmp/grow
		(head -c 67108864 /dev/zero >>/tmp/grow) </dev/null >/dev/null 2>&1 &' ||
		fail "starting the writer"
	"$ctl" cp "$id:/tmp/grow" "$SANDBOX_HOME/grow" 2>"$SANDBOX_HOME/cp.err"
	st=$?
	[ "$st" = 1 ] && grep -q 'the guest sent more than the [0-9]* bytes its size said' \
		"$SANDBOX_HOME/cp.err" || fail "cp of a growing file: status $st, $(cat "$SANDBOX_HOME/cp.err")"
	ls "$SANDBOX_HOME" | grep -q '^grow' && fail "cp left $(ls "$SANDBOX_HOME" | grep '^grow')"
	echo "ok: cp out stopped at the announced size: $(cat "$SANDBOX_HOME/cp.err")"
	"$ctl" exec "$id" -- rm -f /tmp/grow

	# A command that ignores the SIGTERM passed on: exec ends 5 s later, and so does it.
	timeout -s KILL 60 "$CTL_REAL" exec "$id" -- sh -c 'trap "" TERM; echo ready; sleep 600' \
		>"$SANDBOX_HOME/sig.out" 2>"$SANDBOX_HOME/sig.err" &
	sig=$!
	i=0
	until grep -q ready "$SANDBOX_HOME/sig.out" || [ $i -ge 200 ]; do sleep 0.1; i=$((i + 1)); done
	t0=$(date +%s)
	kill -TERM "$sig"
	wait "$sig"
	st=$?
	took=$(($(date +%s) - t0))
	[ "$st" = 143 ] && [ "$took" -ge 4 ] && [ "$took" -le 10 ] ||
		fail "exec of a command ignoring SIGTERM: status $st after $took s, $(cat "$SANDBOX_HOME/sig.err")"
	"$ctl" exec "$id" -- sh -c 'ps | grep -v grep | grep -q "sleep 600"' &&
		fail "the command outlived its exec"
	echo "ok: exec of a command ignoring SIGTERM ended with 143 after $took s, the command killed"
	"$ctl" rm -f "$id" >/dev/null || fail "rm -f"

	# run killed with SIGKILL: its VMM follows.
	printf 'image: busybox\nmemory: 256\nsteps:\n  - name: long\n    run: sleep 600\n' \
		>"$SANDBOX_HOME/job.yaml"
	"$CTL_REAL" run "$SANDBOX_HOME/job.yaml" >"$SANDBOX_HOME/run.out" 2>&1 &
	run=$!
	i=0
	until grep -q '==> \[1/1\] long' "$SANDBOX_HOME/run.out" || [ $i -ge 1200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q '==> \[1/1\] long' "$SANDBOX_HOME/run.out" || { kill -KILL $run; fail "run: $(cat "$SANDBOX_HOME/run.out")"; }
	d=$(ls -d "$SANDBOX_HOME"/sandboxes/*/ | head -n 1)
	pid=$(cut -d" " -f1 "$d/pid")
	kill -KILL $run
	wait $run 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] &&
		[ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ $i -lt 100 ] || fail "the VMM of a SIGKILLed run still runs after 10 s"
	grep -q 'the creator went away (EOF on --lifeline' "$d/console.log" ||
		fail "no lifeline line in the console: $(tail -n 3 "$d/console.log")"
	echo "ok: run killed with SIGKILL: its VMM stopped within $((i / 10)).$((i % 10)) s (the lifeline)"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
exec "$here/sandbox_guest.sh" "$here/ctl_guest.sh" "$@"
