#!/bin/sh
# Run a guest (or any command) under a timeout and check how it ended.
#
# usage: expect.sh [--status N] [--grep REGEX]... [--no-grep REGEX] [--timeout SEC]
#                  [--needs kvm|devhost|FILE]... -- CMD ARGS...
#
# Passes when CMD exits with status N (default 0; N|M: either) and its output (stdout + stderr) matches
# every --grep and no --no-grep. Exits 77 (meson: skipped) with the reason when a --needs is
# not met, so a missing /dev/kvm or guest kernel shows as SKIP, never as a silent pass.
# On failure the last 30 lines of output are shown.
set -u
status=0
timeout=60
greps=""
nogreps=""
while [ $# -gt 0 ]; do
	case "$1" in
	--status) status=$2; shift 2 ;;
	--grep) greps="$greps
$2"; shift 2 ;;
	--no-grep) nogreps="$nogreps
$2"; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--needs)
		case "$2" in
		kvm) [ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: /dev/kvm is not usable here"; exit 77; } ;;
		devhost)
			img=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/devhost/current
			[ -e "$img/vmlinuz" ] || { echo "SKIP: no emulated-host image in $img (tools/dev setup builds it where this host's KVM cannot boot Linux)"; exit 77; } ;;
		*) [ -e "$2" ] || { echo "SKIP: $2 does not exist (run tools/dev setup)"; exit 77; } ;;
		esac
		shift 2 ;;
	--) shift; break ;;
	*) echo "expect.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "expect.sh: no command" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# -k: a guest that ignores SIGTERM is killed 5 s later; the test never hangs.
start=$(date +%s)
timeout -k 5 "$timeout" "$@" >"$out" 2>&1
got=$?
elapsed=$(($(date +%s) - start))
fail=""
# 124 is also what a command says of a timeout of its own (devhost run's, for one): ours only
# when the time is up.
[ "$got" = 124 ] && [ "$elapsed" -ge "$timeout" ] && fail="timed out after ${timeout} s"
[ "$got" = 124 ] && [ -z "$fail" ] && case "|$status|" in *"|124|"*) false ;; esac &&
	fail="exit status 124 after ${elapsed} s (a timeout of the command's own), expected $status"
[ -z "$fail" ] && case "|$status|" in *"|$got|"*) false ;; esac && fail="exit status $got, expected $status"
if [ -z "$fail" ]; then
	printf '%s\n' "$greps" | while IFS= read -r re; do
		[ -z "$re" ] && continue
		grep -Eq -- "$re" "$out" || { echo "output lacks /$re/"; }
	done >"$out.why"
	printf '%s\n' "$nogreps" | while IFS= read -r re; do
		[ -z "$re" ] && continue
		grep -Eq -- "$re" "$out" && { echo "output has /$re/"; }
	done >>"$out.why"
	[ -s "$out.why" ] && fail=$(cat "$out.why")
	rm -f "$out.why"
fi
if [ -n "$fail" ]; then
	echo "FAIL: $*"
	echo "$fail"
	echo "--- last lines of output ---"
	tail -n 30 "$out"
	exit 1
fi
echo "ok: $* (exit $got)"
grep -E -- "$(printf '%s' "$greps" | tr '\n' '|' | sed 's/^|//;s/|$//')" "$out" | head -n 5
exit 0
