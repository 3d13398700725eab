#!/bin/sh
# tools/dev bench job (docs/benchmarks.md, "job"): the job kept in tools/bench/job/ (a set-up
# that builds a dependency from source, then a build and the tests of a small C project)
# run cold, then three times with its set-up cached, in the same run, in a fresh
# $SANDBOX_HOME over the installed images. Where Linux guests boot: natively, or inside the
# emulated KVM host (tools/dev picks).
#
# usage: job.sh BUILD_DIR IMAGES_DIR
# Prints each run's figures, the warm create's (the goal: the cached run's overhead under
# twice a warm create), and last the line
#   job cold_s=<cold run> cached_s=<median cached run> uncached_steps_s=<its steps that ran>
#       overhead_s=<the rest of it: restore, artifacts, teardown>
set -eu
build=$1 images=$2
here=$(cd "$(dirname "$0")" && pwd)
ctl=$build/tools/sandboxctl/sandboxctl
[ -r "$images/debian/rootfs" ] || { echo "job.sh: no debian image in $images (tools/dev setup)" >&2; exit 1; }

SANDBOX_HOME=$(mktemp -d)
export SANDBOX_HOME
cleanup() {
	for d in "$SANDBOX_HOME"/sandboxes/*; do
		[ -d "$d" ] && "$ctl" rm -f "${d##*/}" >/dev/null 2>&1
	done
	rm -rf "$SANDBOX_HOME"
}
trap cleanup EXIT
ln -s "$images" "$SANDBOX_HOME/images"
cp -r "$here/job" "$SANDBOX_HOME/job"

now() { cut -d" " -f1 /proc/uptime; } # centiseconds, also where date has no %N
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }

# run_job NAME: one run of the job; sets secs (its wall time), steps (the seconds of the
# steps that ran, from its --json events) and cached (1 when it restored the set-up).
run_job() {
	t0=$(now)
	if ! "$ctl" run --json --artifacts "$SANDBOX_HOME/arts" "$SANDBOX_HOME/job/job.yaml" \
		>"$SANDBOX_HOME/$1.json" 2>"$SANDBOX_HOME/$1.err"; then
		cat "$SANDBOX_HOME/$1.err" >&2
		echo "job.sh: the $1 run failed; its last output events:" >&2
		grep '"event":"output"' "$SANDBOX_HOME/$1.json" | tail -n 20 >&2
		exit 1
	fi
	secs=$(sub "$(now)" "$t0")
	steps=$(sed -n 's/.*"event":"step-ended".*"seconds":\([0-9.]*\).*/\1/p' "$SANDBOX_HOME/$1.json" |
		awk '{ s += $1 } END { printf "%.3f", s }')
	cached=0
	grep -q '"event":"cache","time":[0-9.]*,"action":"restored"' "$SANDBOX_HOME/$1.json" && cached=1
	grep -q '^all tests passed$' "$SANDBOX_HOME/arts/src/project/test-report.txt" ||
		{ echo "job.sh: the $1 run's tests did not pass" >&2; exit 1; }
	rm -rf "$SANDBOX_HOME/arts"
	echo "$1: ${secs} s, steps that ran ${steps} s, set-up from the cache: $cached"
}

run_job cold
[ "$cached" = 0 ] || { echo "job.sh: the cold run hit a cache" >&2; exit 1; }
cold=$secs
# A warm create of the job's options (its ready snapshot exists now), to the agent's answer.
w=''
for i in 1 2 3; do
	t0=$(now)
	id=$("$ctl" create --image debian --memory 1024 --network none)
	w="$w $(sub "$(now)" "$t0")"
	"$ctl" rm -f "$id" >/dev/null
done
warm=$(echo "$w" | tr ' ' '\n' | sed '/^$/d' | sort -n | sed -n 2p)
echo "warm create (median of 3):$w -> $warm s"
: >"$SANDBOX_HOME/cached"
for i in 1 2 3; do
	run_job "cached-$i"
	[ "$cached" = 1 ] || { echo "job.sh: cached run $i did not restore the set-up" >&2; exit 1; }
	echo "$secs $steps" >>"$SANDBOX_HOME/cached"
done
set -- $(sort -n "$SANDBOX_HOME/cached" | sed -n 2p)
overhead=$(sub "$1" "$2")
echo "overhead $overhead s against a warm create $warm s: $(awk -v o="$overhead" -v w="$warm" 'BEGIN { printf "%.2fx (goal < 2x)", o / w }')"
echo "job cold_s=$cold cached_s=$1 uncached_steps_s=$2 overhead_s=$overhead"
