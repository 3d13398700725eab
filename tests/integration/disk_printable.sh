#!/bin/sh
# sandbox-disk info prints the layer file's text made printable: a parent whose file name
# carries terminal escapes shows them as '?', in the recorded path and where it led, and the
# bytes themselves never reach the output.
#
# usage: disk_printable.sh SANDBOX_DISK
set -u
. "$(dirname "$0")/check_lib.sh"
disk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
parent=$(printf 'base\033]0;owned\007\033[2J.img')
truncate -s 1M "$parent"
"$disk" create-overlay top.layer "$parent" || fail "create-overlay"
"$disk" info top.layer >out 2>&1
st=$?
[ "$st" = 0 ] || { cat -v out; fail "info exited $st"; }
if od -An -c out | grep -q '033\|007'; then
	cat -v out
	fail "an escape from the layer file reached the output"
fi
grep -q '^parent path: *base?\]0;owned??\[2J\.img (.*/base?\]0;owned??\[2J\.img)$' out ||
	{ cat -v out; fail "no printable parent path"; }
# A broken chain's message quotes the path too.
mv "$parent" gone.img
"$disk" info top.layer >out 2>&1
if od -An -c out | grep -q '033\|007'; then
	cat -v out
	fail "an escape reached the output of a broken chain"
fi
grep -q 'BROKEN: .*base?\]0;owned??\[2J\.img' out || { cat -v out; fail "no printable chain error"; }
echo "ok: $(grep '^parent path' out)"
