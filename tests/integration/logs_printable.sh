#!/bin/sh
# sandboxctl logs on a terminal shows the guest's control bytes as '?', and into a pipe gives
# the bytes as they are. The sandbox is only a directory (no VMM): logs reads console.log.
#
# usage: logs_printable.sh SANDBOXCTL
set -u
. "$(dirname "$0")/check_lib.sh"
ctl=$1
command -v script >/dev/null || { echo "SKIP: no script(1) for a terminal"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
id=0123456789ab
d=$tmp/home/sandboxes/$id
mkdir -p "$d"
printf 'version 1\nid %s\nname t\nimage busybox\ncpus 1\nmemory_mib 128\ncreated 0\n' "$id" >"$d/config"
printf 'boot ok\n\033]0;owned\007\033[2Jend\n' >"$d/console.log"
SANDBOX_HOME=$tmp/home "$ctl" logs "$id" | od -An -c | grep -q '033' ||
	fail "a pipe did not get the bytes as they are"
SANDBOX_HOME=$tmp/home script -qec "'$ctl' logs $id" /dev/null >"$tmp/tty.out" 2>&1
if od -An -c "$tmp/tty.out" | grep -q '033'; then
	fail "an escape sequence reached the terminal"
fi
grep -q '?\]0;owned??\[2Jend' "$tmp/tty.out" || fail "got: $(cat -v "$tmp/tty.out")"
echo "ok: the terminal saw ?]0;owned??[2Jend; the pipe the raw bytes"
