#!/bin/sh
# The emulated KVM host's contract: exit statuses come back, files written under $DEVHOST_OUT
# come back (and the project's commands are on PATH there, with python3 and pytest), a hung
# command is cut at the timeout with a clear message, an L1 whose kernel reports a soft lockup
# before it is ready is booted again, and an L1 that stops beating is cut short.
# usage: devhost.sh CASE
set -u
. "$(dirname "$0")/check_lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
run=$top/tools/devhost/run
image=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/devhost/current
[ -e "$image/vmlinuz" ] || { echo "SKIP: no emulated-host image (run tools/dev setup)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case "$1" in
exit-status)
	"$run" --timeout 120 -- sh -c 'exit 3'
	st=$?
	[ "$st" = 3 ] || fail "exit status $st, expected 3" ;;
output-files)
	"$run" --timeout 120 --out "$tmp/out" -- sh -c 'mkdir -p $DEVHOST_OUT/d && echo hi > $DEVHOST_OUT/d/f'
	st=$?
	[ "$st" = 0 ] || fail "exit status $st"
	[ "$(cat "$tmp/out/d/f" 2>/dev/null)" = hi ] || { ls -lR "$tmp"; fail "$tmp/out/d/f did not come back"; }
	# The project's commands are on PATH there, from the shared build dir; and python3 with
	# what sdk/python's tests use, and pytest (python.ext4), in the same boot.
	where=$("$run" --timeout 120 -- sh -c 'command -v sandboxctl; command -v sandbox-vmm
		python3 -c "import ssl, json, asyncio, socket, subprocess, sqlite3, pytest; print(\"pytest\", pytest.__version__)"') ||
		fail "sandboxctl or sandbox-vmm not on PATH, or python3 failed, in the emulated host: '$where'"
	echo "$where" | grep -q '/tools/sandboxctl/sandboxctl$' && echo "$where" | grep -q '/vmm/sandbox-vmm$' ||
		fail "PATH gives '$where'"
	echo "$where" | grep -q '^pytest [0-9]' || fail "no python3 with pytest: '$where'" ;;
timeout)
	"$run" --timeout 25 -- sleep 1000 2>"$tmp/err"
	st=$?
	cat "$tmp/err"
	[ "$st" = 124 ] || fail "exit status $st, expected 124"
	grep -q 'devhost: timed out after 25 s' "$tmp/err" || fail "no timeout message" ;;
lockup-retry)
	# L1's kernel reporting a soft lockup before L1 is ready (its KVM health check stuck)
	# is a boot that did not come up: booted again at once, and the command runs. The boot's
	# own bound is raised past what a loaded machine needs to reach the injected report (a
	# suite beside other work once took more than the default 60 s, and the boot timeout's
	# retry answered first): what is tested is that the report ends the boot, not how soon.
	# A first boot that hung before L1's init ran (the emulation's own hang, once in CI under
	# load: no report within 300 s, the boot timeout's retry) never reached the hook: what is
	# tested did not run, so it is run once more; both outputs are shown.
	for try in 1 2; do
		DEVHOST_INJECT_LOCKUP=1 "$run" --timeout 400 --boot-timeout 300 -- sh -c 'exit 5' \
			2>"$tmp/err"
		st=$?
		cat "$tmp/err"
		grep -q 'devhost: retry 1 (no kvm-ready marker' "$tmp/err" || break
		echo "the first boot hung before the injected report (attempt $try): again"
	done
	[ "$st" = 5 ] || fail "exit status $st, expected 5"
	grep -q "devhost: retry 1 (L1's kernel reported a soft lockup" "$tmp/err" || fail "no retry message" ;;
heartbeat)
	# L1 stopping (here: its heartbeat's loop stopped, as a hung kernel stops it) is cut
	# after DEVHOST_HB_TIMEOUT, not the whole --timeout, as a failure of the emulated host.
	DEVHOST_HB_TIMEOUT=8 "$run" --timeout 120 -- sh -c '
		for s in /proc/[0-9]*/stat; do
			set -- $(cat "$s" 2>/dev/null)
			[ "${2-}" = "(sleep)" ] && [ "$4" != 1 ] && kill -STOP "$4"
		done
		sleep 100' 2>"$tmp/err"
	st=$?
	cat "$tmp/err"
	[ "$st" = 124 ] || fail "exit status $st, expected 124"
	grep -q 'devhost: L1 gave no heartbeat for 8 s' "$tmp/err" || fail "no heartbeat message" ;;
pool)
	# tools/devhost/pool: one L1 for many commands. A pool of its own (its state lives in its
	# --build dir), so that stopping it stops no other test's.
	pool=$top/tools/devhost/pool b=$tmp/build
	mkdir -p "$b"
	trap '"$pool" stop --build "$b"; rm -rf "$tmp"' EXIT
	"$pool" exec --build "$b" -- sh -c 'echo out; echo err >&2; exit 3' >"$tmp/o" 2>"$tmp/e"
	st=$?
	[ "$st" = 3 ] || { cat "$tmp/e"; fail "exit status $st, expected 3"; }
	[ "$(cat "$tmp/o")" = out ] && grep -qx err "$tmp/e" ||
		fail "stdout '$(cat "$tmp/o")', stderr '$(cat "$tmp/e")'"
	echo "ok: status and both streams apart"
	mkdir "$tmp/add" && echo in >"$tmp/add/f"
	"$pool" exec --build "$b" --add "$tmp/add" -e V=val -- sh -c "
		[ \"\$(cat $tmp/add/f)\" = in ] && [ \"\$V\" = val ] && [ -c /dev/kvm ] &&
		echo hi >\$DEVHOST_OUT/g" 2>"$tmp/e"
	st=$?
	[ "$st" = 0 ] || { cat "$tmp/e"; fail "--add, -e or /dev/kvm: status $st"; }
	o=$(sed -n 's/^devhost-pool: output files in //p' "$tmp/e")
	[ "$(cat "$o/g" 2>/dev/null)" = hi ] || { cat "$tmp/e"; fail "no output file came back"; }
	rm -rf "$o"
	"$pool" exec --build "$b" -- sh -c "[ ! -e $tmp/add ]" ||
		fail "an added path outlived its command"
	echo "ok: --add, -e, /dev/kvm and \$DEVHOST_OUT; the added path gone after"
	"$pool" exec --build "$b" --timeout 3 -- sleep 100 2>"$tmp/e"
	st=$?
	[ "$st" = 124 ] && grep -q 'timed out after 3 s' "$tmp/e" ||
		{ cat "$tmp/e"; fail "a timed-out command: status $st"; }
	echo "ok: a command past its timeout is killed: 124"
	# L1 dying under a command (its kernel crashed, as a hung emulation is stopped): 124, and the next command
	# gets a new L1.
	"$pool" exec --build "$b" -- sh -c 'echo c >/proc/sysrq-trigger' 2>"$tmp/e"
	st=$?
	[ "$st" = 124 ] || { cat "$tmp/e"; fail "L1 crashed under a command: status $st, expected 124"; }
	"$pool" exec --build "$b" -- true || fail "no new L1 after one died"
	n=$(grep -c ' boot [0-9]* up' "$b/meson-logs/devhost.log")
	[ "$n" = 2 ] || fail "$n boots for six commands and one death, expected 2"
	echo "ok: an L1 that died is a 124, and the next command boots another (2 boots in all)"
	# Two commands at once: each in a slot of its own, an L1 of one vCPU; the first holds its
	# slot (15 s) while the second takes one. The second starts once the first holds a slot's
	# lock (on a loaded host the first's start can lag the second's, which then ran in slot 0
	# and left it free for the first: one slot, no concurrency shown). /proc/locks says so
	# without taking the lock, which would send the first to the other slot.
	DEVHOST_POOL_SLOTS=2 "$pool" exec --build "$b" -- sh -c \
		'nproc; sleep 15' >"$tmp/o1" 2>"$tmp/e1" &
	p1=$!
	i=0
	until for l in "$b"/.devhost-pool/slot-*/lock; do
		ino=$(stat -c %i "$l" 2>/dev/null) && grep -q ":$ino " /proc/locks && break
	done; do
		i=$((i + 1))
		[ "$i" -lt 300 ] || fail "the first command never held a slot"
		sleep 0.1
	done
	DEVHOST_POOL_SLOTS=2 "$pool" exec --build "$b" -- nproc >"$tmp/o2" 2>"$tmp/e2"
	st=$?
	wait "$p1"
	st1=$?
	[ "$st" = 0 ] && [ "$st1" = 0 ] || { cat "$tmp/e1" "$tmp/e2"; fail "two at once: status $st1 and $st"; }
	[ "$(cat "$tmp/o1")" = 1 ] && [ "$(cat "$tmp/o2")" = 1 ] ||
		fail "an L1 of the pool has $(cat "$tmp/o1") and $(cat "$tmp/o2") CPUs, expected 1"
	grep -q ' boot [0-9]* up .*(slot 1,' "$b/meson-logs/devhost.log" ||
		{ cat "$b/meson-logs/devhost.log"; fail "the second command did not get a second slot"; }
	echo "ok: two commands at once ran in two slots, each L1 of one vCPU" ;;
*)
	echo "devhost.sh: unknown case $1" >&2
	exit 2 ;;
esac
echo "ok: devhost $1"
