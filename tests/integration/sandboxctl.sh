#!/bin/sh
# sandboxctl end to end with a real guest: import the busybox image, create a sandbox, exec in
# it, and remove it leaving nothing behind.
#
# usage: sandboxctl.sh SANDBOXCTL VMM KERNEL INITRD
# Checks: `exec -- echo hi` prints hi; `sh -c 'exit 7'` exits 7; a missing program exits 127;
# stdin piped with -i comes back; -t gives a tty; --timeout kills with 124; a file copied in
# and out keeps its sha256; pause/resume; ls shows it running, then stopped; rm and rm -f
# leave no process, no socket, no directory. sandbox_guest.sh decides where the guest boots
# and runs the checks there (this script with --inner).
set -u
here=$(cd "$(dirname "$0")" && pwd)


. "$here/guest_lib.sh"

# gone ID PID: no directory, no VMM process, no socket left.
gone() {
	[ -e "$SANDBOX_HOME/sandboxes/$1" ] && fail "rm left $SANDBOX_HOME/sandboxes/$1"
	# A process whose stat cannot be read any more was reaped between the two looks: gone.
	pstate=$(cut -d' ' -f3 "/proc/$2/stat" 2>/dev/null)
	kill -0 "$2" 2>/dev/null && [ -n "$pstate" ] && [ "$pstate" != Z ] &&
		fail "the VMM (pid $2) of $1 is still running: $(cat "/proc/$2/stat" 2>&1)," \
			"command line '$(tr '\0' ' ' <"/proc/$2/cmdline" 2>&1)'"
	find "$SANDBOX_HOME" -type s | grep -q . && fail "sockets left: $(find "$SANDBOX_HOME" -type s)"
	true
}

# --inner CTL KERNEL INITRD ROOTFS: the checks, with a fresh $SANDBOX_HOME.
# jailed ID: its VMM as /proc shows it is confined (docs/hardening.md): a seccomp filter on
# every thread, no_new_privs, no capabilities, not root, namespaces of its own, its sandbox
# directory as its root, its limits.
jailed() {
	p=$(cut -d" " -f1 "$SANDBOX_HOME/sandboxes/$1/pid")
	st=/proc/$p/status
	grep -q '^Seccomp:	2$' "$st" || fail "$1: the VMM has no seccomp filter: $(grep Seccomp "$st")"
	grep -q '^NoNewPrivs:	1$' "$st" || fail "$1: the VMM lacks no_new_privs"
	for c in CapEff CapPrm CapBnd CapAmb; do
		grep -q "^$c:	0000000000000000$" "$st" || fail "$1: the VMM has $(grep "^$c" "$st")"
	done
	grep -q '^Uid:	0	' "$st" && fail "$1: the VMM runs as root"
	for t in /proc/"$p"/task/*; do
		grep -q '^Seccomp:	2$' "$t/status" || fail "$1: thread $t has no seccomp filter"
	done
	for ns in mnt pid ipc uts net; do
		[ "$(readlink "/proc/$p/ns/$ns")" != "$(readlink "/proc/self/ns/$ns")" ] ||
			fail "$1: the VMM is in the host's $ns namespace"
	done
	[ "$(stat -c %d:%i "/proc/$p/root/")" = "$(stat -c %d:%i "$SANDBOX_HOME/sandboxes/$1/")" ] ||
		fail "$1: the VMM's root is not its sandbox directory"
	grep -q '^Max open files  *4096  *4096' "/proc/$p/limits" || fail "$1: no fd limit"
	grep -q '^Max core file size  *0  *0' "/proc/$p/limits" || fail "$1: core dumps allowed"
	echo "ok: $1's VMM (pid $p) is jailed: seccomp on every thread, no capabilities, uid" \
		"$(awk '/^Uid:/ { print $2 }' "$st"), its own namespaces and root, limits"
}

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh # a hung step fails with status 137 instead of stalling
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	id=$("$ctl" create --image busybox --memory 256 --timeout 120) || fail "create (status $?)"
	echo "created $id"
	"$ctl" ls | grep -q "^$id .* running " || { "$ctl" ls; fail "ls does not show $id running"; }
	jailed "$id"

	out=$("$ctl" exec "$id" -- echo hi) || fail "exec echo: status $?"
	[ "$out" = hi ] || fail "exec echo printed '$out'"
	"$ctl" exec "$id" -- sh -c 'exit 7'
	st=$?
	[ "$st" = 7 ] || fail "exit 7 gave status $st"
	"$ctl" exec "$id" -- /no/such/program 2>/dev/null
	st=$?
	[ "$st" = 127 ] || fail "a missing program gave status $st"
	out=$(echo piped | "$ctl" exec -i "$id" -- cat) || fail "exec -i cat: status $?"
	[ "$out" = piped ] || fail "stdin came back as '$out'"
	"$ctl" exec -t "$id" -- tty >/dev/null || fail "exec -t tty: status $?"
	"$ctl" exec --timeout 1 "$id" -- sleep 30 2>/dev/null
	st=$?
	[ "$st" = 124 ] || fail "--timeout gave status $st"

	head -c 3000000 /dev/urandom >"$SANDBOX_HOME/in.bin"
	"$ctl" cp "$SANDBOX_HOME/in.bin" "$id:/tmp/in.bin" || fail "cp in"
	"$ctl" cp "$id:/tmp/in.bin" "$SANDBOX_HOME/out.bin" || fail "cp out"
	[ "$(sha256sum <"$SANDBOX_HOME/in.bin")" = "$(sha256sum <"$SANDBOX_HOME/out.bin")" ] ||
		fail "the file changed on its way in and out"

	"$ctl" pause "$id" || fail "pause"
	"$ctl" ls | grep -q "^$id .* paused " || fail "ls does not show $id paused"
	"$ctl" resume "$id" || fail "resume"
	[ "$("$ctl" exec "$id" -- echo back)" = back ] || fail "exec after resume"

	# stop keeps the sandbox; exec on it is refused; rm then leaves nothing
	pid=$(cut -d" " -f1 "$SANDBOX_HOME/sandboxes/$id/pid")
	"$ctl" stop "$id" || fail "stop: status $?"
	"$ctl" ls | grep -q "^$id .* stopped " || { "$ctl" ls; fail "ls does not show $id stopped"; }
	"$ctl" exec "$id" -- true 2>/dev/null
	st=$?
	[ "$st" = 125 ] || fail "exec on a stopped sandbox gave status $st"
	"$ctl" rm "$id" || fail "rm of a stopped sandbox: status $?"
	gone "$id" "$pid"

	# a second one, removed while running: refused without -f
	id=$("$ctl" create --image busybox --memory 256 --timeout 120 --name two) ||
		fail "second create (status $?)"
	pid=$(cut -d" " -f1 "$SANDBOX_HOME/sandboxes/$id/pid")
	"$ctl" rm two 2>/dev/null && fail "rm of a running sandbox without -f succeeded"
	"$ctl" rm -f two || fail "rm -f: status $?"
	gone "$id" "$pid"
	"$ctl" exec "$id" -- true 2>/dev/null
	st=$?
	[ "$st" = 125 ] || fail "exec on a removed sandbox gave status $st"
	# a VMM that dies leaves a sandbox ls shows dead and rm (no -f) cleans up
	id=$("$ctl" create --image busybox --memory 256 --timeout 120 --name three) ||
		fail "third create (status $?)"
	pid=$(cut -d" " -f1 "$SANDBOX_HOME/sandboxes/$id/pid")
	kill -KILL "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] &&
		[ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	"$ctl" ls | grep -q "^$id .* dead " || { "$ctl" ls; fail "ls does not show $id dead"; }
	"$ctl" rm three || fail "rm of a dead sandbox: status $?"
	gone "$id" "$pid"
	echo "ok: sandboxctl create, exec, cp, pause, resume, stop, rm; a dead VMM shows dead"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
exec "$here/sandbox_guest.sh" "$here/sandboxctl.sh" "$@"
