#!/bin/sh
# Job specs run in a real guest (docs/jobspec.md) on the busybox image, through `sandboxctl run`:
# - the job's env, a step's env over it, a step's workdir;
# - continue-on-error: the failing step is reported, the next one runs, the job passes;
# - a step failing without it: the job exits with its status and no later step runs;
# - disk: the root disk has the size the spec gives;
# - network: none: no network interface but lo in the guest;
# - a malformed spec: exit 2 with FILE:LINE:COLUMN, and no sandbox made.
#
# usage: jobspec_guest.sh SANDBOXCTL VMM KERNEL INITRD (sandbox_guest.sh runs it with --inner)
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	job=$SANDBOX_HOME/job.yaml
	out=$SANDBOX_HOME/run.out
	cat >"$job" <<'SPEC'
image: busybox
memory: 256
disk: 1
network: none
env:
  WHO: job
  KEEP: kept
steps:
  - name: env
    run: echo "who=$WHO keep=$KEEP extra=$EXTRA"
    env: {WHO: step, EXTRA: "1"}
  - name: prepare
    run: mkdir -p /work/src && echo made >/work/src/f
  - name: workdir
    workdir: /work/src
    run: echo "pwd=$(pwd) f=$(cat f)"
  - name: soft failure
    continue-on-error: true
    run: echo failing; exit 3
  - name: after
    run: echo "after ran; who=$WHO"
  - name: disk and network
    run: echo "root_kib=$(df -k / | awk 'NR == 2 { print $2 }') ifaces=$(ls /sys/class/net | tr '\n' ' ')"
SPEC
	timeout 600 "$CTL_REAL" run "$job" >"$out" 2>&1
	st=$?
	[ "$st" = 0 ] || fail "the job failed with $st: $(cat "$out")"
	grep -q '^who=step keep=kept extra=1$' "$out" || fail "step env over the job's: $(cat "$out")"
	grep -q '^pwd=/work/src f=made$' "$out" || fail "workdir: $(cat "$out")"
	grep -q '<== \[4/6\] soft failure: failed, continuing (continue-on-error) (status 3)' "$out" ||
		fail "continue-on-error not reported: $(cat "$out")"
	grep -q '^after ran; who=job$' "$out" || fail "the step after a soft failure: $(cat "$out")"
	grep -q '==> job passed' "$out" || fail "a soft failure failed the job: $(cat "$out")"
	kib=$(sed -n 's/^root_kib=\([0-9]*\) .*/\1/p' "$out")
	[ "${kib:-0}" -gt 900000 ] || fail "disk: 1 gave a root of ${kib:-?} KiB: $(cat "$out")"
	grep -q 'ifaces=lo $' "$out" || fail "network: none left interfaces: $(grep ifaces= "$out")"
	echo "ok: env over env, workdir, continue-on-error, a 1 GiB disk ($kib KiB), no network"

	cat >"$job" <<'SPEC'
image: busybox
memory: 256
network: none
steps:
  - name: first
    run: echo first
  - name: breaks
    run: exit 7
  - name: never
    run: echo never ran
SPEC
	timeout 600 "$CTL_REAL" run "$job" >"$out" 2>&1
	st=$?
	[ "$st" = 7 ] || fail "a failing step: the job exited $st, not 7: $(cat "$out")"
	grep -q 'never ran' "$out" && fail "a step ran after a failure"
	grep -q '==> job failed' "$out" || fail "no 'job failed': $(cat "$out")"
	echo "ok: a failing step stops the job with its status (7)"

	printf 'image: busybox\nsteps:\n  - run: a\n    workdir: relative\n' >"$job"
	timeout 10 "$CTL_REAL" run "$job" >"$out" 2>&1
	st=$?
	[ "$st" = 2 ] && grep -q 'job.yaml:4:14: workdir: give an absolute path' "$out" ||
		fail "a malformed spec: status $st, $(cat "$out")"
	[ -z "$(ls "$SANDBOX_HOME/sandboxes" 2>/dev/null)" ] || fail "a malformed spec left a sandbox"
	echo "ok: a malformed spec: exit 2 at FILE:LINE:COLUMN, nothing made"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
exec "$here/sandbox_guest.sh" "$here/jobspec_guest.sh" "$@"
