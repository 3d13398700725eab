#!/bin/sh
# tests/specs/check.sh SANDBOXCTL [--update]: the job-spec golden files (docs/jobspec.md).
# Each NAME.yaml here is given to `sandboxctl run --check`, from this directory so that errors
# name it as NAME.yaml; NAME.expected holds "exit N" and then what it printed (stdout and
# stderr). A spec must be answered within a second of CPU time (cpu_ms.py: a loaded machine
# does not stretch it) and 5 s of wall time at most (a hang), a malformed one with its
# FILE:LINE:COLUMN error and exit 2, never a crash. --update rewrites the
# .expected files from what the specs give now (review the diff).
set -u
ctl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
update=${2:-}
cd "$(dirname "$0")" || exit 1
cpu=$(mktemp)
trap 'rm -f "$cpu"' EXIT
fails=0
n=0
for spec in *.yaml; do
	name=${spec%.yaml}
	n=$((n + 1))
	rm -f "$cpu"
	out=$(timeout 5 python3 ./cpu_ms.py "$cpu" "$ctl" run --check "$spec" 2>&1)
	rc=$?
	ms=$(cat "$cpu" 2>/dev/null || echo 5000)
	got=$(printf 'exit %s\n%s\n' "$rc" "$out")
	if [ "$update" = --update ]; then
		printf '%s\n' "$got" >"$name.expected"
		continue
	fi
	if [ ! -f "$name.expected" ]; then
		echo "FAIL: $spec has no $name.expected"
		fails=$((fails + 1))
	elif [ "$got" != "$(cat "$name.expected")" ]; then
		echo "FAIL: $spec:"
		printf '%s\n' "$got" | diff "$name.expected" - | sed 's/^/  /'
		fails=$((fails + 1))
	elif [ "$ms" -gt 1000 ]; then
		echo "FAIL: $spec took $ms ms of CPU (more than a second)"
		fails=$((fails + 1))
	fi
	case $rc in
	0 | 2) ;;
	*) echo "FAIL: $spec: exit $rc (0 or 2 expected: never a crash or a timeout)"; fails=$((fails + 1)) ;;
	esac
done
for e in *.expected; do
	[ -f "${e%.expected}.yaml" ] || { echo "FAIL: $e without its spec"; fails=$((fails + 1)); }
done
# What a CI's logs say it ran.
"$ctl" --version | grep -Eq '^sandboxctl [0-9]+\.[0-9]+\.[0-9]+$' ||
	{ echo "FAIL: sandboxctl --version: $("$ctl" --version 2>&1)"; fails=$((fails + 1)); }
[ "$fails" = 0 ] || exit 1
echo "ok: $n job specs, each answered as its .expected says within a second"
