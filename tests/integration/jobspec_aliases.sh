#!/bin/sh
# A job spec whose aliases repeat a 1 MiB script 1000 times is refused with file, line and
# column, in bounded memory: under a 256 MiB address-space limit (before the bound it took
# ~1 GiB and the limit killed it).
#
# usage: jobspec_aliases.sh SANDBOXCTL
set -u
. "$(dirname "$0")/check_lib.sh"
ctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
big=$(head -c 999800 /dev/zero | tr '\0' x)
{
	echo "steps:"
	echo "  - &s {run: \"$big\"}"
	i=0
	while [ $i -lt 999 ]; do
		echo "  - *s"
		i=$((i + 1))
	done
} >"$tmp/bomb.yaml"
out=$( (ulimit -v 262144; SANDBOX_HOME=$tmp/home "$ctl" run "$tmp/bomb.yaml") 2>&1)
st=$?
echo "$out"
[ "$st" = 2 ] || fail "status $st, expected 2"
echo "$out" | grep -q "bomb.yaml:2:.*add up to more than 4 MiB" ||
	fail "no file:line:column message about the aliases"
echo "ok: refused with file, line and column, within 256 MiB"
