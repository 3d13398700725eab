#!/bin/bash
# Build the libFuzzer targets (tests/fuzz/Makefile, clang) and run each for a while.
#
# usage: tests/fuzz/run.sh [--ci] [--out DIR] [SECONDS] [TARGET...]
#   SECONDS   of fuzzing per target (default 60); TARGETs default to all of them
#   --ci      the meson test fuzz-corpus: a fresh scratch corpus per run (the kept one is
#             left alone), so what runs is the in-tree corpus and SECONDS of mutations of it
#   --out     where the build and the corpora go (default build/fuzz, or $FUZZ_OUT)
#
# Each target starts from its in-tree seeds, tests/fuzz/corpus/<target>/ (read-only: new
# inputs go to DIR/corpus-<target>, kept between runs), and prints one line: its executions
# (libFuzzer's stat::number_of_executed_units) and whether it crashed. A crash leaves its
# input as DIR/crash-<target>-*; reproduce with `DIR/fuzz_<target> FILE`. Exits 1 when any
# target crashed, 77 when clang or its fuzzer runtime is missing (apt-get install clang
# libclang-rt-14-dev), 2 on a bad argument.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-$root/build/fuzz}
cc=${FUZZ_CC:-clang}
ci=0
while [ $# -gt 0 ]; do
	case $1 in
	--ci) ci=1 ;;
	--out)
		out=$2
		shift
		;;
	*) break ;;
	esac
	shift
done
secs=${1:-60}
[ $# -gt 0 ] && shift
case $secs in
'' | *[!0-9]*)
	echo "run.sh: SECONDS must be a number, not '$secs'" >&2
	exit 2
	;;
esac

mk=(make -s -f "$root/tests/fuzz/Makefile" ROOT="$root" OUT="$out" FUZZ_CC="$cc")
if ! command -v "$cc" >/dev/null || ! command -v make >/dev/null; then
	echo "SKIP: $cc or make is not installed (apt-get install clang libclang-rt-14-dev make)"
	exit 77
fi
# The fuzzer runtime is a separate package on Debian; without it clang says so only at link.
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
	"$cc" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
	echo "SKIP: $cc cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev)"
	exit 77
fi
read -r -a all < <("${mk[@]}" list)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
	if [[ " ${all[*]} " != *" $t "* ]]; then
		echo "run.sh: unknown fuzz target '$t' (${all[*]})" >&2
		exit 2
	fi
done

mkdir -p "$out"
if ! "${mk[@]}" -j"$(nproc)" "${targets[@]/#/fuzz_}" >"$out/build.log" 2>&1; then
	tail -40 "$out/build.log"
	echo "run.sh: building the fuzz targets failed (log: $out/build.log)"
	exit 1
fi

crashed=0
for t in "${targets[@]}"; do
	seeds=$root/tests/fuzz/corpus/$t
	if [ "$ci" = 1 ]; then
		work=$(mktemp -d "$out/ci-corpus-$t.XXXXXX")
	else
		work=$out/corpus-$t
		mkdir -p "$work"
	fi
	log=$out/fuzz_$t.log
	rc=0
	# -timeout: an input that runs 10 s is a hang, reported as a crash. -rss_limit_mb: the
	# VMM targets map RAM without reserve; what they touch stays small.
	(cd "$out" && ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_$t" -max_total_time="$secs" \
		-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$out/crash-$t-" "$work" "$seeds") >"$log" 2>&1 || rc=$?
	[ "$ci" = 1 ] && rm -rf "$work"
	execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
	cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 || true)
	if [ "$rc" != 0 ]; then
		tail -40 "$log"
		echo "fuzz_$t: CRASH after ${execs:-?} executions (exit $rc; log: $log)"
		crashed=1
	else
		echo "fuzz_$t: ${execs:-?} executions in $secs s, no crash (${cov:-cov: ?})"
	fi
done
exit $crashed
