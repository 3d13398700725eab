#!/bin/sh
# Snapshots of a real Linux guest through sandboxctl (busybox image): snapshot, restore, fork,
# suspend and resume, and bad snapshots.
#
# usage: snapshot_linux.sh SANDBOXCTL VMM KERNEL INITRD
# Checks: a process counting in a loop goes on from its value at the snapshot; a file written
# before the snapshot is there after restore and one written after is not; after rm -rf /etc,
# restoring the snapshot gives a working system; 8 forks each run a command and see the
# parent's files and processes, the parent running on; /dev/urandom differs between every
# pair of forks; a suspended sandbox has no VMM and resumes with its processes and files;
# a bit-flipped state, a changed meta, another host's key and a short memory file are refused
# with a message; a snapshot in use is not removed; bad names and counts are refused; a chain
# of snapshots and restores past 8 frozen layers is made one layer, its files and processes kept.
# sandbox_guest.sh decides where the guest boots and runs the checks there (--inner).
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

# count ID: the guest's counter (the loop writes it every 100 ms).
count() {
	"$ctl" exec "$1" -- cat /tmp/count || fail "exec cat /tmp/count in $1: status $?"
}

# ms: milliseconds of uptime (busybox's date has no %N).
ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# counting ID: the counter goes up within 2 s.
counting() {
	c1=$(count "$1")
	sleep 2
	c2=$(count "$1")
	[ "$c2" -gt "$c1" ] || fail "$1: the counter did not go on ($c1, then $c2)"
}

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	# The first create boots and leaves the image's ready snapshot; the next ones restore it.
	t0=$(ms)
	id=$("$ctl" create --image busybox --memory 192 --timeout 120) || fail "create (status $?)"
	t1=$(ms)
	ls -d "$SANDBOX_HOME"/snapshots/.ready-busybox-* >/dev/null 2>&1 ||
		fail "the first create left no ready snapshot"
	w1=$("$ctl" create --image busybox --memory 192 --timeout 120) || fail "warm create: $?"
	t2=$(ms)
	w2=$("$ctl" create --image busybox --memory 192 --timeout 120) || fail "warm create: $?"
	grep -q '^base .ready-busybox-' "$SANDBOX_HOME/sandboxes/$w1/config" ||
		fail "the second create did not restore the ready snapshot"
	[ "$("$ctl" exec "$w1" -- echo warm)" = warm ] || fail "exec in a warm-created sandbox"
	u1=$("$ctl" exec "$w1" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1')
	u2=$("$ctl" exec "$w2" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1')
	[ -n "$u1" ] && [ "$u1" != "$u2" ] || fail "two warm creates read the same urandom: $u1"
	c=$("$ctl" create --cold --image busybox --memory 192 --timeout 120) || fail "create --cold"
	grep -q '^base ' "$SANDBOX_HOME/sandboxes/$c/config" && fail "create --cold restored"
	"$ctl" rm -f "$w1" "$w2" "$c" || fail "rm of the warm sandboxes"
	echo "ok: warm create answers exec (cold $((t1 - t0)) ms with the ready snapshot made," \
		"warm $((t2 - t1)) ms), urandom differs; --cold boots"
	"$ctl" exec "$id" -- sh -c 'echo before >/root/before; i=0
		(while :; do i=$((i+1)); echo $i >/tmp/count.n; mv /tmp/count.n /tmp/count; sleep 0.1; done) </dev/null >/dev/null 2>&1 &
		sync' || fail "starting the counter: status $?"
	sleep 1
	"$ctl" snapshot "$id" snap1 || fail "snapshot: status $?"
	at_snap=$(count "$id")
	"$ctl" exec "$id" -- sh -c 'echo after >/root/after; sync' || fail "write after"
	"$ctl" snapshots | grep -q '^snap1 ' || { "$ctl" snapshots; fail "snapshots does not list snap1"; }
	counting "$id"
	echo "ok: snapshot; the parent counts on"

	r1=$("$ctl" restore snap1) || fail "restore: status $?"
	c=$(count "$r1")
	now=$(count "$id")
	[ "$c" -lt "$now" ] || fail "the restored counter $c is not behind the parent's $now"
	[ "$c" -ge "$((at_snap - 20))" ] || fail "the restored counter $c is far behind $at_snap"
	counting "$r1"
	[ "$("$ctl" exec "$r1" -- cat /root/before)" = before ] || fail "restored: /root/before"
	"$ctl" exec "$r1" -- test -e /root/after && fail "restored: /root/after is there"
	echo "ok: restore goes on counting from $c (snapshot at $at_snap), with the snapshot's files"

	"$ctl" exec "$r1" -- rm -rf /etc
	r2=$("$ctl" restore snap1) || fail "restore after rm -rf /etc: status $?"
	"$ctl" exec "$r2" -- test -e /etc/passwd -o -e /etc/hostname -o -d /etc ||
		fail "the second restore has no /etc"
	[ "$("$ctl" exec "$r2" -- echo works)" = works ] || fail "the second restore does not work"
	"$ctl" rm -f "$r1" "$r2" || fail "rm of the restored sandboxes"
	echo "ok: rm -rf /etc, then a restore of the snapshot works"

	kids=$("$ctl" fork -n 8 "$id") || fail "fork -n 8: status $?"
	[ "$(echo "$kids" | wc -l)" = 8 ] || fail "fork -n 8 printed: $kids"
	[ "$("$ctl" exec "$id" -- echo parent)" = parent ] || fail "the parent after the fork"
	rands=""
	for k in $kids; do
		[ "$("$ctl" exec "$k" -- cat /root/before)" = before ] || fail "fork $k: /root/before"
		"$ctl" exec "$k" -- sh -c 'ps | grep -q "[s]leep 0.1" || test -s /tmp/count' ||
			fail "fork $k: the parent's counter process is not there"
		r=$("$ctl" exec "$k" -- sh -c 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"') ||
			fail "fork $k: urandom"
		rands="$rands$r
"
	done
	[ "$(printf %s "$rands" | sort -u | grep -c .)" = 8 ] ||
		fail "two forks read the same /dev/urandom bytes: $rands"
	counting "$id"
	for k in $kids; do "$ctl" rm -f "$k" >/dev/null || fail "rm of fork $k"; done
	echo "ok: 8 forks see the parent's files and processes, differ in urandom; the parent runs on"

	pid=$(cut -d" " -f1 "$SANDBOX_HOME/sandboxes/$id/pid")
	"$ctl" suspend "$id" || fail "suspend: status $?"
	kill -0 "$pid" 2>/dev/null && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ] &&
		fail "the suspended sandbox's VMM (pid $pid) still runs"
	"$ctl" ls | grep -q "^$id .* suspended " || { "$ctl" ls; fail "ls does not show $id suspended"; }
	"$ctl" resume "$id" || fail "resume of the suspended sandbox: status $?"
	counting "$id"
	[ "$("$ctl" exec "$id" -- cat /root/after)" = after ] || fail "resumed: /root/after"
	echo "ok: suspend ends the VMM; resume brings back its processes and files"

	# Bad snapshots: copies of snap1 with one thing wrong.
	snaps=$SANDBOX_HOME/snapshots
	bad() { # NAME: make snapshots/NAME a copy of snap1 (hard links) with its own state and meta
		mkdir "$snaps/$1" && for f in "$snaps/snap1"/*; do ln "$f" "$snaps/$1/"; done &&
			rm "$snaps/$1/state.fdt" "$snaps/$1/meta.yaml" &&
			cp "$snaps/snap1/state.fdt" "$snaps/snap1/meta.yaml" "$snaps/$1/"
	}
	refused() { # NAME WHAT
		out=$("$ctl" restore "$1" 2>&1) && fail "a snapshot with $2 was restored: $out"
		echo "$out" | grep -q "$3" || fail "a snapshot with $2: the message was '$out'"
	}
	bad flipped && printf '\377' | dd of="$snaps/flipped/state.fdt" bs=1 seek=300 conv=notrunc 2>/dev/null
	refused flipped "a flipped state bit" "MAC does not match"
	bad trunc && head -c 200 "$snaps/snap1/state.fdt" >"$snaps/trunc/state.fdt"
	refused trunc "a truncated state" "MAC does not match"
	bad meta && sed -i 's/^cpus: .*/cpus: 4/' "$snaps/meta/meta.yaml"
	refused meta "a changed meta.yaml" "MAC does not match"
	bad short && rm "$snaps/short/memory" && head -c 1048576 /dev/zero >"$snaps/short/memory"
	refused short "a short memory file" "memory file is"
	cp "$SANDBOX_HOME/snapshot.key" "$SANDBOX_HOME/key.saved"
	head -c 32 /dev/urandom >"$SANDBOX_HOME/snapshot.key"
	refused snap1 "another host's key" "MAC does not match"
	cp "$SANDBOX_HOME/key.saved" "$SANDBOX_HOME/snapshot.key"
	refused nosuch "no such snapshot" "no such snapshot"
	"$ctl" restore ../snap1 >/dev/null 2>&1 && fail "a snapshot name with .. was accepted"
	"$ctl" snapshot "$id" a/b >/dev/null 2>&1 && fail "a snapshot name with / was accepted"
	"$ctl" fork -n 0 "$id" >/dev/null 2>&1 && fail "fork -n 0 was accepted"
	"$ctl" fork -n 10000 "$id" >/dev/null 2>&1 && fail "fork -n 10000 was accepted"
	# sandboxctl killed at 20 points of a snapshot: no half snapshot is ever visible, and
	# the previous one (snap1) stays restorable; the sandbox runs on.
	i=0
	while [ $i -lt 20 ]; do
		"$CTL_REAL" snapshot "$id" killed >/dev/null 2>&1 &
		p=$!
		sleep "0.$(( (i * 37) % 10 ))$(( (i * 53) % 10 ))"
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
		if [ -d "$snaps/killed" ]; then
			[ -f "$snaps/killed/mac" ] && [ -f "$snaps/killed/meta.yaml" ] ||
				fail "kill $i left a half snapshot: $(ls "$snaps/killed")"
			"$ctl" snapshot rm killed || fail "rm of a whole snapshot after kill $i"
		fi
		i=$((i + 1))
	done
	counting "$id"
	echo "ok: 20 kills of sandboxctl mid-snapshot left no half snapshot"

	r3=$("$ctl" restore snap1) || fail "restore with the key back: status $?"
	"$ctl" snapshot rm snap1 2>/dev/null && fail "snapshot rm of a snapshot in use succeeded"
	"$ctl" rm -f "$r3" || fail "rm $r3"
	"$ctl" snapshot rm snap1 || fail "snapshot rm of an unused snapshot: status $?"
	echo "ok: bad snapshots, names and counts refused; a snapshot in use is kept"

	# A full disk while snapshotting: the snapshot fails with a message, the previous one
	# and the sandbox are fine. SANDBOX_HOME's file system is filled to a few MiB.
	"$ctl" snapshot "$id" snap2 || fail "snapshot snap2: status $?"
	mkdir "$SANDBOX_HOME/full" && mount -t tmpfs -o size=40m tmpfs "$SANDBOX_HOME/full" ||
		fail "cannot mount a small tmpfs"
	# The snapshots directory moves onto the small file system for this step.
	mv "$snaps" "$SANDBOX_HOME/snaps.real" && mkdir "$SANDBOX_HOME/full/snapshots" &&
		ln -s "$SANDBOX_HOME/full/snapshots" "$snaps" || fail "cannot move the snapshots"
	head -c 36700160 /dev/zero >"$SANDBOX_HOME/full/filler" 2>/dev/null
	out=$("$ctl" snapshot "$id" snap3 2>&1) && fail "a snapshot on a full disk succeeded"
	echo "$out" | grep -q "No space left" || fail "a full disk: the message was '$out'"
	ls "$SANDBOX_HOME/full/snapshots" | grep -q . &&
		fail "the full disk kept a half snapshot: $(ls "$SANDBOX_HOME/full/snapshots")"
	rm "$snaps" && mv "$SANDBOX_HOME/snaps.real" "$snaps" && umount "$SANDBOX_HOME/full"
	counting "$id"
	r4=$("$ctl" restore snap2) || fail "restore of snap2 after the full disk: status $?"
	[ "$("$ctl" exec "$r4" -- cat /root/after)" = after ] || fail "snap2's restore: /root/after"
	echo "ok: a full disk fails the snapshot with a message; the previous one restores"

	# A chain of snapshots and restores, each one a frozen layer more: a restore of a snapshot
	# of more than 8 frozen layers makes them one (restore.c, disk_flatten), so a sandbox
	# moved this way again and again can always be snapshotted. Its files and processes stay.
	cur=$r4 k=0 flat=0 most=0
	while [ $k -lt 12 ] && [ $flat = 0 ]; do
		k=$((k + 1))
		"$ctl" exec "$cur" -- sh -c "echo deep$k >/root/deep$k; sync" || fail "deep $k: write"
		"$ctl" snapshot "$cur" "deep$k" || fail "deep $k: snapshot: status $?"
		next=$("$ctl" restore "deep$k") || fail "deep $k: restore: status $?"
		"$ctl" rm -f "$cur" >/dev/null || fail "deep $k: rm $cur"
		# (the next snapshot names it as its parent: -f; the sandboxes hold their layers)
		[ $k -gt 1 ] && { "$ctl" snapshot rm -f "deep$((k - 1))" 2>/dev/null ||
			fail "rm deep$((k - 1))"; }
		cur=$next
		n=$(ls "$SANDBOX_HOME/sandboxes/$cur/" | grep -c '\.layer$')
		[ "$n" -gt "$most" ] && most=$n
		[ "$n" = 2 ] && flat=$k
	done
	[ $flat != 0 ] || fail "12 snapshots and restores in a row: the layers were never made one"
	[ "$most" -le 10 ] || fail "a restore's disk had $most layers (at most 9 frozen and a top)"
	i=1
	while [ $i -le $k ]; do
		[ "$("$ctl" exec "$cur" -- cat /root/deep$i)" = "deep$i" ] || fail "flat: /root/deep$i"
		i=$((i + 1))
	done
	[ "$("$ctl" exec "$cur" -- cat /root/after)" = after ] || fail "flat: /root/after"
	counting "$cur"
	"$ctl" snapshot "$cur" deeper || fail "a snapshot of the flattened sandbox: status $?"
	last=$("$ctl" restore deeper) || fail "a restore of it: status $?"
	n=$(ls "$SANDBOX_HOME/sandboxes/$last/" | grep -c '\.layer$')
	[ "$n" = 3 ] || fail "the restore after the flattened one has $n layers, not 3"
	[ "$("$ctl" exec "$last" -- cat /root/deep1)" = deep1 ] || fail "after flat: /root/deep1"
	"$ctl" rm -f "$cur" "$last" >/dev/null || fail "rm of the deep sandboxes"
	echo "ok: snapshot and restore $k times: at most $most layers, made one at restore $flat;" \
		"files and processes kept"

	# Another version of the image under a snapshot: its restore is refused, naming why.
	cp "$rootfs" "$SANDBOX_HOME/rootfs2" &&
		printf 'x' | dd of="$SANDBOX_HOME/rootfs2" bs=1 seek=2048 conv=notrunc 2>/dev/null &&
		"$CTL_REAL" images import busybox --kernel "$kernel" --initrd "$initrd" \
			--rootfs "$SANDBOX_HOME/rootfs2" >/dev/null || fail "importing a changed image"
	out=$("$ctl" restore snap2 2>&1) && fail "a snapshot of another image version was restored"
	echo "$out" | grep -q "changed" || fail "another image version: the message was '$out'"
	echo "ok: a snapshot of another image version is refused"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
exec "$here/sandbox_guest.sh" "$here/snapshot_linux.sh" "$@"
