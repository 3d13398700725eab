#!/bin/bash
# The object store's layer (store/) against Swift's S3 API, started here on loopback and
# stopped after: tests/fleet/store_check.c's checks (S3 calls, chunks, manifests, a second
# snapshot's upload, corrupt and swapped chunks named, another workspace refused).
#
#   store.sh STORE_CHECK
set -euo pipefail
check=$1
work=$(mktemp -d /var/tmp/fleet-store.XXXXXX) # ext4 here: Swift's object server wants xattrs
here=$(cd "$(dirname "$0")" && pwd)
port=$((20000 + RANDOM % 20000))
coproc SWIFT { exec /usr/bin/python3 "$here/swift_s3.py" "$work/swift" --port "$port" 2>&1; }
cleanup() {
	exec {SWIFT[1]}>&- 2>/dev/null || true # stdin's end: swift_s3.py stops the servers
	wait "$SWIFT_PID" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
read -r -t 90 line <&"${SWIFT[0]}" || { echo "store.sh: Swift did not start" >&2; exit 1; }
case $line in
"swift-s3 endpoint="*) ;;
*)
	echo "store.sh: Swift: $line" >&2
	cat <&"${SWIFT[0]}" >&2 || true
	exit 1
	;;
esac
set -- $line
endpoint=${2#endpoint=} access=${3#access=} secret=${4#secret=} region=${5#region=}
"$check" "$endpoint" "$access" "$secret" "$region" "$work"
