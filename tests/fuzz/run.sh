#!/bin/bash
# Build and run the libFuzzer targets for a while; not part of the default test suite.
# usage: tests/fuzz/run.sh [SECONDS] [TARGET]   (defaults: 60 s, virtq; or proto, snapstate, proxy)
#
# Needs clang and its fuzzer runtime (Debian: apt-get install clang libclang-rt-14-dev). The
# target is compiled here directly with clang, so the default gcc build is left alone. Output
# goes to build/fuzz/ (or $FUZZ_OUT): the binary, the corpus (kept between runs, seeded from the
# target's own seed writer), crash inputs (crash-*) and the log. Exits non-zero on a crash.
set -euo pipefail

secs=${1:-60}
target=${2:-virtq}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-$root/build/fuzz}
cc=${FUZZ_CC:-clang}

if ! command -v "$cc" >/dev/null; then
	echo "SKIP: $cc is not installed (apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
case $target in
virtq) srcs=("$root/vmm/virtio/queue.c" "$root/vmm/memory.c") ;;
proto) srcs=("$root/wire/proto.c") ;;
snapstate)
	# The whole VMM but main.c, with ioctl() wrapped (the target says why).
	mapfile -t srcs < <(ls "$root"/vmm/*.c "$root"/vmm/virtio/*.c | grep -v '/main\.c$')
	libs=(-Wl,--wrap=ioctl -luring -lcrypto -lfdt -lpthread)
	extra=(-Wno-gnu-variable-sized-type-not-at-end) # vcpu.c's one-MSR struct, fine for gcc
	;;
proxy)
	# The proxy's parsers of guest and upstream bytes (all of proxy/ but main.c).
	mapfile -t srcs < <(ls "$root"/proxy/*.c | grep -v '/main\.c$')
	libs=(-lssl -lcrypto -lyaml -lpthread)
	extra=(-I"$root/proxy")
	;;
*)
	echo "unknown fuzz target: $target" >&2
	exit 2
	;;
esac

# The project's warnings, as errors, as in the meson build.
cflags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -I"$root/vmm" -I"$root/guest" -I"$root/wire" -Wall -Wextra -Werror
	-Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter -Wformat=2 -Wvla)
san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

libs=(${libs[@]+"${libs[@]}"})
cflags+=(${extra[@]+"${extra[@]}"})
mkdir -p "$out/corpus-$target"
"$cc" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer -o "$out/fuzz_$target" \
	"$root/tests/fuzz/fuzz_$target.c" "${srcs[@]}" ${libs[@]+"${libs[@]}"}
"$cc" "${cflags[@]}" -DFUZZ_VIRTQ_SEEDS -DFUZZ_SEEDS -o "$out/seed_$target" \
	"$root/tests/fuzz/fuzz_$target.c" "${srcs[@]}" ${libs[@]+"${libs[@]}"}
"$out/seed_$target" "$out/corpus-$target"

log=$out/fuzz_$target.log
rc=0
# -print_final_stats=1 prints the execution count (stat::number_of_executed_units).
"$out/fuzz_$target" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/" \
	"$out/corpus-$target" >"$log" 2>&1 || rc=$?
execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 || true)
if [ "$rc" != 0 ]; then
	tail -60 "$log"
	echo "fuzz_$target: CRASH after ${execs:-?} executions (exit $rc); inputs in $out/crash-*"
	exit 1
fi
echo "fuzz_$target: ${execs:-?} executions in $secs s, no crash ($cov; log: $log)"
