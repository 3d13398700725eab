#!/bin/sh
# Four Linux sandboxes at once, each running execs and copies both ways for MANY_SECONDS
# (issue 13's "4 Linux sandboxes at once in the emulated host ... for 2 minutes"): nothing lost,
# nothing left after rm.
#
# usage: sandboxctl_many.sh SANDBOXCTL VMM KERNEL INITRD
# Each sandbox has a worker that loops until the time is up: an exec whose output names the
# round and the sandbox, a file of 64 KiB to MANY_CP_MAX_KIB KiB (random bytes, random size)
# copied in, summed in the guest, copied out and compared with the original by sha256, and an
# exec -i of it through cat. Every byte is checked; the first mismatch or failed call fails the
# test. Then every sandbox is removed: no VMM or proxy process of theirs is left, no directory
# under $SANDBOX_HOME/sandboxes, no network namespace or cgroup named for them. As
# sandboxctl.sh: natively where Linux boots, inside the emulated KVM host on kvm-pvm (a run
# that fails there is retried once by route.sh, like every guest test there), skipped
# otherwise. MANY_SECONDS is 30 in the default suite, 120 for the issue's figure (by hand:
# MANY_SECONDS=120 meson test -C build sandboxctl-many).
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

up() { cut -d' ' -f1 /proc/uptime; }

create() {
	CTL_REAL="$ctl" CTL_DEADLINE=240 "$here/ctl_bounded.sh" create --image busybox \
		--memory 192 --timeout 600 "$@"
}

ctlb() { CTL_REAL="$ctl" CTL_DEADLINE=120 "$here/ctl_bounded.sh" "$@"; }

# worker N ID END: rounds until uptime END; counts in $SANDBOX_HOME/w$N.count, the first
# failure in $SANDBOX_HOME/w$N.fail.
worker() {
	n=$1 id=$2 end=$3
	d=$SANDBOX_HOME/w$n
	mkdir -p "$d"
	rounds=0 bytes=0
	while [ "$(echo "$(up) $end" | awk '{ print ($1 < $2) }')" = 1 ]; do
		rounds=$((rounds + 1))
		out=$(ctlb exec "$id" -- sh -c "echo round-$rounds-of-$n") ||
			{ echo "exec $rounds failed (status $?)" >"$d.fail"; return; }
		[ "$out" = "round-$rounds-of-$n" ] ||
			{ echo "exec $rounds printed '$out'" >"$d.fail"; return; }
		kib=$((64 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % (cp_max_kib - 63)))
		head -c $((kib * 1024)) /dev/urandom >"$d/in"
		want=$(sha256sum <"$d/in" | cut -c1-64)
		ctlb cp "$d/in" "$id:/tmp/f$rounds" ||
			{ echo "cp in of $kib KiB in round $rounds failed (status $?)" >"$d.fail"; return; }
		got=$(ctlb exec "$id" -- sha256sum "/tmp/f$rounds" | cut -c1-64)
		[ "$got" = "$want" ] ||
			{ echo "round $rounds: $kib KiB copied in summed $got in the guest, not $want" >"$d.fail"; return; }
		ctlb cp "$id:/tmp/f$rounds" "$d/out" ||
			{ echo "cp out in round $rounds failed (status $?)" >"$d.fail"; return; }
		got=$(sha256sum <"$d/out" | cut -c1-64)
		[ "$got" = "$want" ] ||
			{ echo "round $rounds: $kib KiB copied out came back as $got, not $want" >"$d.fail"; return; }
		got=$(ctlb exec -i "$id" -- cat <"$d/in" | sha256sum | cut -c1-64)
		[ "$got" = "$want" ] ||
			{ echo "round $rounds: $kib KiB through exec -i cat came back as $got" >"$d.fail"; return; }
		ctlb exec "$id" -- rm "/tmp/f$rounds" ||
			{ echo "exec rm in round $rounds failed" >"$d.fail"; return; }
		bytes=$((bytes + 3 * kib * 1024))
		echo "$rounds $bytes" >"$d.count"
	done
}

inner() {
	ctl=$1 kernel=$2 initrd=$3 rootfs=$4
	seconds=${MANY_SECONDS:-30}
	cp_max_kib=${MANY_CP_MAX_KIB:-4096}
	guest_home "$ctl" "$kernel" "$initrd" "$rootfs"
	t0=$(up)
	for n in 1 2 3 4; do
		create >"$SANDBOX_HOME/id$n" 2>"$SANDBOX_HOME/create$n.err" &
	done
	wait
	ids=
	for n in 1 2 3 4; do
		id=$(cat "$SANDBOX_HOME/id$n")
		[ -n "$id" ] || fail "create $n: $(cat "$SANDBOX_HOME/create$n.err")"
		ids="$ids $id"
	done
	echo "4 sandboxes created at once in $(echo "$t0 $(up)" | awk '{ printf "%.1f", $2 - $1 }') s:$ids"
	end=$(echo "$(up) $seconds" | awk '{ print $1 + $2 }')
	n=0
	for id in $ids; do
		n=$((n + 1))
		worker "$n" "$id" "$end" &
	done
	wait
	total_rounds=0 total_bytes=0
	for n in 1 2 3 4; do
		[ -e "$SANDBOX_HOME/w$n.fail" ] && fail "sandbox $n: $(cat "$SANDBOX_HOME/w$n.fail")"
		read -r r b <"$SANDBOX_HOME/w$n.count" || fail "sandbox $n finished no round"
		echo "sandbox $n: $r rounds, $b bytes checked"
		total_rounds=$((total_rounds + r))
		total_bytes=$((total_bytes + b))
	done
	echo "ok: 4 sandboxes for $seconds s: $total_rounds rounds (each 4 execs and 2 copies), $total_bytes bytes checked, no mismatch"

	pids=
	for id in $ids; do
		pids="$pids $(cut -d' ' -f1 "$SANDBOX_HOME/sandboxes/$id/pid")"
	done
	for id in $ids; do
		ctlb rm -f "$id" || fail "rm -f $id"
	done
	for p in $pids; do
		kill -0 "$p" 2>/dev/null && fail "VMM $p still runs after rm"
	done
	left=$(ls -A "$SANDBOX_HOME/sandboxes" | grep -v '^\.lock$') # sandboxctl's own lock stays
	[ -z "$left" ] || fail "left in sandboxes/ after rm: $left"
	for id in $ids; do
		# The VMM's and the proxy's command lines name the sandbox's directory. (Not any
		# process: busybox's timeout leaves its watcher, with the same arguments, behind.)
		ps -eo pid,args | grep -E 'sandbox-(vmm|proxy)' | grep -v grep | grep -- "$id" &&
			fail "a VMM or proxy of $id is left"
		ip netns list 2>/dev/null | grep -q -- "$id" && fail "network namespace of $id left"
		find /sys/fs/cgroup -maxdepth 4 -name "*$id*" 2>/dev/null | grep -q . &&
			fail "a cgroup of $id is left: $(find /sys/fs/cgroup -maxdepth 4 -name "*$id*")"
	done
	echo "ok: nothing left after rm (processes, directories, network namespaces, cgroups)"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi

opts="--timeout $((${MANY_SECONDS:-30} + 900)) --memory 4096 ${MANY_DEVHOST_OPTS:-}"
SANDBOX_GUEST_DEVHOST="$opts -e MANY_SECONDS=${MANY_SECONDS:-30} -e MANY_CP_MAX_KIB=${MANY_CP_MAX_KIB:-4096}"
export SANDBOX_GUEST_DEVHOST
exec "$here/sandbox_guest.sh" "$here/sandboxctl_many.sh" "$@"
