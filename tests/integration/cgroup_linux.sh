#!/bin/sh
# Resource limits of real Linux sandboxes through sandboxctl (busybox image): a hostile guest
# that allocates all its memory, spins every vCPU and writes without end, beside a quiet one.
#
# usage: cgroup_linux.sh SANDBOXCTL VMM KERNEL INITRD
# Checks: the hostile sandbox's cgroup (v2 in the emulated host, where this runs on our
# machines) holds its VMM and its proxy, with the memory limit of its RAM, the CPU quota of
# --cpus and pids.max; under the load its VMM lives, its memory (now and at its peak) stays
# under the limit and was never OOM-killed, its disk layer stays under the disk's size; the
# quiet sandbox answers every `exec true` beside it (its times beside the hostile one paused
# and running are printed; the comparison is a benchmark's, tools/dev bench noisy); a fork of the
# quiet one raises its limit by its frozen RAM and the parent runs on; `stats` and `ls` show
# CPU and memory used; rm leaves no cgroup. sandbox_guest.sh decides where the guest boots.
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

# ms: milliseconds of uptime.
ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# json ID KEY: a number from `stats --json`.
json() {
	"$ctl" stats --json "$1" | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p"
}

# exec_pairs QUIET HOSTILE: 7 pairs of `exec true` in QUIET, one with HOSTILE paused (idle:
# its memory still held, its vCPUs parked), one with it running; interleaved, so the rest of
# the machine's load falls on both alike. Sets idle and busy to the medians in ms.
exec_pairs() {
	: >"$SANDBOX_HOME/idle"
	: >"$SANDBOX_HOME/busy"
	i=0
	while [ "$i" -lt 7 ]; do
		i=$((i + 1))
		"$ctl" pause "$2" || fail "pause $2: status $?"
		t0=$(ms)
		"$ctl" exec "$1" -- true || fail "exec true in $1: status $?"
		echo $(($(ms) - t0)) >>"$SANDBOX_HOME/idle"
		"$ctl" resume "$2" || fail "resume $2: status $?"
		sleep 1
		t0=$(ms)
		"$ctl" exec "$1" -- true || fail "exec true in $1: status $?"
		echo $(($(ms) - t0)) >>"$SANDBOX_HOME/busy"
	done
	idle=$(sort -n "$SANDBOX_HOME/idle" | sed -n 4p)
	busy=$(sort -n "$SANDBOX_HOME/busy" | sed -n 4p)
}

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	quiet=$("$ctl" create --cold --image busybox --memory 128 --network none --timeout 120) ||
		fail "create of the quiet sandbox (status $?)"
	hostile=$("$ctl" create --cold --image busybox --memory 192 --cpus 2 --timeout 120) ||
		fail "create of the hostile sandbox (status $?)"
	hdir=$SANDBOX_HOME/sandboxes/$hostile
	vpid=$(cut -d" " -f1 "$hdir/pid")
	ppid=$(cat "$hdir/proxy.pid")
	cg=$("$ctl" stats --json "$hostile" | sed -n 's/.*"dir": "\([^"]*\)".*/\1/p')
	ver=$("$ctl" stats --json "$hostile" | sed -n 's/.*"cgroup": "\(v[12]\)".*/\1/p')
	[ -n "$cg" ] && [ -d "$cg" ] || fail "no cgroup for $hostile: $("$ctl" stats "$hostile" 2>&1)"
	grep -qx "$vpid" "$cg/cgroup.procs" || fail "the VMM $vpid is not in $cg"
	grep -qx "$ppid" "$cg/cgroup.procs" || fail "the proxy $ppid is not in $cg"
	limit=$(json "$hostile" memory_max_bytes)
	want=$(((192 << 20) + (96 << 20) + (192 << 20) / 64))
	# A disk on tmpfs (the emulated host's state) is memory: its size is in the limit.
	size=$(stat -c %s "$rootfs")
	case $(stat -f -c %T "$hdir" 2>/dev/null) in
	tmpfs | ramfs) want=$((want + size)) ;;
	esac
	[ "$limit" = "$want" ] || fail "the memory limit is $limit, not $want"
	if [ "$ver" = v2 ]; then
		[ "$(cat "$cg/cpu.max")" = "200000 100000" ] || fail "cpu.max: $(cat "$cg/cpu.max")"
	else
		cpu=$(sed -n 's/^cpu //p' "$hdir/cgroup")
		[ "$(cat "$cpu/cpu.cfs_quota_us")" = 200000 ] ||
			fail "cpu.cfs_quota_us: $(cat "$cpu/cpu.cfs_quota_us")"
	fi
	# 128 + 2 vCPUs (the VMM's share) + 1048 (the proxy's thread budget, client.h)
	[ "$(json "$hostile" pids_max)" = 1178 ] || fail "pids.max: $(json "$hostile" pids_max)"
	echo "ok: $ver cgroup $cg holds the VMM and the proxy; memory $((limit >> 20)) MiB, 2 CPUs, 1178 pids"

	# The hostile guest: every vCPU spinning, memory allocated until its OOM killer strikes
	# (tail keeps the one endless line of /dev/zero), and a disk written until it is full,
	# again and again.
	"$ctl" exec "$hostile" -- sh -c '
		for i in 1 2; do (while :; do :; done) </dev/null >/dev/null 2>&1 & done
		(while :; do tail /dev/zero; done) </dev/null >/dev/null 2>&1 &
		(while :; do dd if=/dev/zero of=/fill bs=1M 2>/dev/null; sync; rm -f /fill; done) \
			</dev/null >/dev/null 2>&1 &' || fail "starting the load: status $?"
	sleep 20
	exec_pairs "$quiet" "$hostile"
	peak=$(json "$hostile" memory_peak_bytes)
	now=$(json "$hostile" memory_bytes)
	cpu=$(json "$hostile" cpu_usec)
	kill -0 "$vpid" 2>/dev/null || fail "the hostile sandbox's VMM died under its load"
	[ "$now" -le "$limit" ] && [ "$peak" -le "$limit" ] ||
		fail "the hostile sandbox's memory $now (peak $peak) is over its limit $limit"
	if [ -f "$cg/memory.events" ]; then
		kills=$(sed -n 's/^oom_kill \([0-9]*\)/\1/p' "$cg/memory.events")
		[ "${kills:-0}" = 0 ] || fail "the hostile sandbox's cgroup saw $kills OOM kills"
	fi
	used=$(($(du -k "$hdir/root.layer" | cut -f1) * 1024))
	[ "$used" -le $((size + (8 << 20))) ] ||
		fail "the hostile sandbox's layer holds $used bytes: its disk is $size"
	"$ctl" exec "$hostile" -- true || fail "the hostile sandbox no longer answers"
	echo "ok: under load the hostile VMM lives, memory $((now >> 20)) MiB (peak $((peak >> 20))) under $((limit >> 20)) MiB, layer $((used >> 20)) MiB of a $((size >> 20)) MiB disk, CPU $((cpu / 1000)) ms; the quiet sandbox's exec $idle ms beside it paused, $busy ms beside it running"
	"$ctl" rm -f "$hostile" || fail "rm -f of the hostile sandbox"
	[ -d "$cg" ] && fail "its cgroup $cg is still there after rm"

	before=$(json "$quiet" memory_max_bytes)
	kid=$("$ctl" fork "$quiet") || fail "fork of the quiet sandbox: status $?"
	after=$(json "$quiet" memory_max_bytes)
	[ "$after" -gt "$before" ] || fail "the parent's limit did not grow at the fork: $before, $after"
	# The parent rewrites memory the fork froze (its page cache): it must live.
	"$ctl" exec "$quiet" -- sh -c 'head -c 48m /dev/zero >/tmp/z; rm /tmp/z' ||
		fail "the forked parent's writes: status $?"
	[ "$("$ctl" exec "$quiet" -- echo alive)" = alive ] || fail "the parent after its fork"
	[ "$("$ctl" exec "$kid" -- echo child)" = child ] || fail "the fork's child"
	"$ctl" stats "$quiet" | grep -q '^cpu .* s used, limit 1 CPUs$' ||
		fail "stats: $("$ctl" stats "$quiet")"
	"$ctl" ls | grep "^$quiet " | grep -q ' [0-9.]*s  *[0-9.]* [KM]iB  *[^ ]*$' ||
		fail "ls shows no CPU and memory used: $("$ctl" ls)"
	echo "ok: fork raised the parent's limit $((before >> 20)) -> $((after >> 20)) MiB; parent and child run; stats and ls show what was used"
	"$ctl" rm -f "$kid" "$quiet" || fail "rm -f"
	echo "cgroup-linux: all ok"
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
	exit 0
fi
# In the emulated host: two guests under load, each step slow there. A run takes 50-70 s
# (CI and here); the 300 s bound is what a hung emulated host costs before the retry.
SANDBOX_GUEST_DEVHOST="--timeout 300 --memory 3072"
export SANDBOX_GUEST_DEVHOST
exec "$here/sandbox_guest.sh" "$here/cgroup_linux.sh" "$@"
