#!/bin/sh
# Job specs run in a real guest (docs/jobspec.md) on the busybox image, through `sandboxctl run`:
# - the job's env, a step's env over it, a step's workdir;
# - continue-on-error: the failing step is reported, the next one runs, the job passes;
# - files in, a directory whole (a symlink in it skipped);
# - a step failing without it: the job exits with its status and no later step runs, and the
#   artifacts are copied out after it (a glob, a directory; the guest's symlink skipped);
# - the job's timeout: exit 124, the artifacts still taken;
# - the cache: a second run restores the state after the cached step and skips the steps up
#   to it; --no-cache, a change to the cached step and a change to the image run them;
# - --json events and a --junit report (of the job that timed out);
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
	mkdir -p "$SANDBOX_HOME/app"
	echo alpha >"$SANDBOX_HOME/app/a.txt"
	if [ "${JOBSPEC_PART:-}" = cache ]; then
		cache_part
		exit 0
	fi
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

	# files in (a directory with a subdirectory, a symlink out of it skipped, one file
	# elsewhere), a failing step, and the artifacts it left copied out after it: a glob, a
	# directory (its symlink to a guest file skipped) and one that matches nothing.
	mkdir -p "$SANDBOX_HOME/app/sub"
	echo alpha >"$SANDBOX_HOME/app/a.txt"
	echo beta >"$SANDBOX_HOME/app/sub/b.txt"
	ln -sf /etc/hostname "$SANDBOX_HOME/app/out-link"
	echo gamma >"$SANDBOX_HOME/one.cfg"
	arts=$SANDBOX_HOME/arts
	cat >"$job" <<'SPEC'
image: busybox
memory: 256
network: none
files:
  - {src: app, dst: /work/app}
  - {src: ./one.cfg, dst: /etc/job/one.cfg}
steps:
  - name: first
    run: echo "files=$(cat /work/app/a.txt /work/app/sub/b.txt /etc/job/one.cfg | tr '\n' ' ')link=$(ls /work/app/out-link 2>&1 | grep -c 'No such')"
  - name: breaks
    run: mkdir -p /out/d && echo r1 >/out/r-1.xml && echo r2 >/out/r-2.xml && echo other >/out/o.txt && echo deep >/out/d/x && ln -s /etc/passwd /out/d/pw && exit 7
  - name: never
    run: echo never ran
artifacts: ["/out/r-*.xml", /out/d, /nothing/here]
SPEC
	timeout 600 "$CTL_REAL" run --artifacts "$arts" "$job" >"$out" 2>&1
	st=$?
	[ "$st" = 7 ] || fail "a failing step: the job exited $st, not 7: $(cat "$out")"
	grep -q 'never ran' "$out" && fail "a step ran after a failure"
	grep -q '==> job failed' "$out" || fail "no 'job failed': $(cat "$out")"
	grep -q '^files=alpha beta gamma link=1$' "$out" || fail "files in: $(cat "$out")"
	grep -q 'files: skipped .*/app/out-link (a symlink)' "$out" || fail "the symlink in files: $(cat "$out")"
	[ "$(cat "$arts/out/r-1.xml" "$arts/out/r-2.xml" "$arts/out/d/x" 2>&1 | tr '\n' ' ')" = "r1 r2 deep " ] ||
		fail "artifacts: $(find "$arts" 2>&1) $(cat "$out")"
	[ -e "$arts/out/o.txt" ] && fail "artifacts: /out/o.txt matched no pattern but was copied"
	[ -e "$arts/out/d/pw" ] || [ -L "$arts/out/d/pw" ] && fail "artifacts: the guest's symlink was copied"
	grep -q 'artifact /nothing/here: nothing matched' "$out" || fail "no word of an empty match: $(cat "$out")"
	echo "ok: files in (a symlink skipped); a failing step stops the job with its status (7); its artifacts out after it (a glob, a directory, its symlink skipped)"

	# The job's timeout: the step still running is stopped, the job exits 124, and the
	# artifacts are still taken.
	cat >"$job" <<'SPEC'
image: busybox
memory: 256
network: none
timeout: 8
steps:
  - name: slow "one"
    run: echo started; echo late >/late.txt; echo late2 >/late2.txt; sleep 300
  - run: echo never
artifacts: [/late.txt, /late2.txt]
SPEC
	# a symlink already where an artifact goes (as one committed in a checkout): refused,
	# not written through
	ln -sf "$SANDBOX_HOME/victim" "$arts/late2.txt"
	t0=$(date +%s)
	timeout 600 "$CTL_REAL" run --json --junit "$SANDBOX_HOME/junit.xml" --artifacts "$arts" "$job" \
		>"$out" 2>"$out.err"
	st=$?
	t=$(($(date +%s) - t0))
	[ "$st" = 124 ] || fail "a job timeout: exit $st, not 124: $(cat "$out" "$out.err")"
	[ "$(cat "$arts/late.txt" 2>&1)" = late ] || fail "no artifact after a timeout: $(cat "$out.err")"
	[ -e "$SANDBOX_HOME/victim" ] && fail "an artifact was written through a symlink"
	grep -q "late2.txt is there already and not a file (a symlink?): not written" "$out.err" ||
		fail "no word of the symlink refused: $(cat "$out.err")"
	echo "ok: the job's timeout stops it with 124 ($t s, from the create), its artifacts taken (not through a symlink)"
	# --json: every stdout line an event; --junit: the report.
	grep -qv '^{"event":"[a-z-]*","time":[0-9.]*,.*}$' "$out" && fail "--json: a line that is no event: $(cat "$out")"
	for want in '"event":"job-started",.*"image":"busybox","steps":2' \
		'"event":"step-started",.*"step":1,"name":"slow \\"one\\""' \
		'"event":"output",.*"step":1,"stream":"stdout","data":"started\\n"' \
		'"event":"step-ended",.*"step":1,.*"status":124,"outcome":"failed"' \
		'"event":"artifact",.*"path":"/late.txt","file":".*/late.txt","bytes":5' \
		'"event":"job-ended",.*"status":124,"outcome":"failed"'; do
		grep -q "$want" "$out" || fail "--json: no $want in $(cat "$out")"
	done
	grep -q 'never' "$out" && fail "--json: the step after the timeout ran"
	x=$(cat "$SANDBOX_HOME/junit.xml")
	case $x in
	*'tests="2" failures="1" skipped="1"'*'name="1. slow &quot;one&quot;"'*'<failure message="status 124"/>'*'<system-out>started'*'name="2. step 2"'*'<skipped message="not run"/>'*) ;;
	*) fail "--junit: $x" ;;
	esac
	echo "ok: --json gives the job's events, one a line; --junit its report"

	printf 'image: busybox\nsteps:\n  - run: a\n    workdir: relative\n' >"$job"
	timeout 10 "$CTL_REAL" run "$job" >"$out" 2>&1
	st=$?
	[ "$st" = 2 ] && grep -q 'job.yaml:4:14: workdir: give an absolute path' "$out" ||
		fail "a malformed spec: status $st, $(cat "$out")"
	[ -z "$(ls "$SANDBOX_HOME/sandboxes" 2>/dev/null)" ] || fail "a malformed spec left a sandbox"
	echo "ok: a malformed spec: exit 2 at FILE:LINE:COLUMN, nothing made"
	exit 0
}

# The cache, a test of its own (jobspec-cache: JOBSPEC_PART=cache).
cache_part() {
	# The cache: the first run keeps the state after 'setup'; the second restores it (the
	# token setup made, and the files, are there; setup does not run); --no-cache runs it; a
	# change to the cached step, or to the image, runs it again.
	cat >"$job" <<'SPEC'
image: busybox
memory: 256
network: none
files:
  - {src: app, dst: /work/app}
steps:
  - name: setup
    run: head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n' >/var/token; echo "setup ran token=$(cat /var/token)"
  - name: use
    run: echo "use token=$(cat /var/token) app=$(cat /work/app/a.txt)"
cache: setup
SPEC
	cache_run() {
		timeout 600 "$CTL_REAL" run "$@" "$job" >"$out" 2>&1
		st=$?
		[ "$st" = 0 ] || fail "cache run $*: status $st: $(cat "$out")"
	}
	cache_run
	tok=$(sed -n 's/^setup ran token=\([0-9a-f]*\)$/\1/p' "$out")
	[ -n "$tok" ] && grep -q "^use token=$tok app=alpha$" "$out" && grep -q '==> cache: kept the state after step 1' "$out" ||
		fail "cache, first run: $(cat "$out")"
	cache_run
	grep -q '==> cache: restored the state after step 1 (setup)' "$out" && ! grep -q 'setup ran' "$out" &&
		grep -q "^use token=$tok app=alpha$" "$out" || fail "cache, second run: $(cat "$out")"
	hit=$(sed -n 's/.*restored the state after step 1 (setup) in \([0-9.]*\) s.*/\1/p' "$out")
	cache_run --no-cache
	grep -q 'setup ran' "$out" && ! grep -q '==> cache' "$out" && ! grep -q "^use token=$tok " "$out" ||
		fail "cache, --no-cache: $(cat "$out")"
	sed -i 's/echo "setup ran/echo "setup ran again, "; echo "setup ran/' "$job"
	cache_run
	grep -q 'setup ran again' "$out" && grep -q '==> cache: kept' "$out" || fail "cache, a changed step: $(cat "$out")"
	cp "$rootfs" "$SANDBOX_HOME/rootfs2" && dd if=/dev/zero bs=1M count=1 2>/dev/null >>"$SANDBOX_HOME/rootfs2" &&
		"$CTL_REAL" images import busybox --kernel "$kernel" --initrd "$initrd" --rootfs "$SANDBOX_HOME/rootfs2" >/dev/null ||
		fail "re-importing the image"
	cache_run
	grep -q 'setup ran again' "$out" && grep -q '==> cache: kept' "$out" || fail "cache, a changed image: $(cat "$out")"
	n=$("$CTL_REAL" snapshots --all | grep -c '^\.job-')
	[ "$n" = 3 ] || fail "cache: $n job snapshots, not 3: $("$CTL_REAL" snapshots --all)"
	echo "ok: cache: a second run restores the state after the cached step (in $hit s) and skips it; --no-cache, a changed step and a changed image run it"

}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
# In the emulated host: each part's runs take a minute or two there (the cache's snapshots
# are of 256 MiB guests, on L1's tmpfs).
SANDBOX_GUEST_DEVHOST="--timeout 300 --memory 3072${JOBSPEC_PART:+ -e JOBSPEC_PART=$JOBSPEC_PART}"
export SANDBOX_GUEST_DEVHOST
exec "$here/sandbox_guest.sh" "$here/jobspec_guest.sh" "$@"
