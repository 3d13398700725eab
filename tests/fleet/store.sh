#!/bin/bash
# The object store's layer (store/) against Swift's S3 API, started here on loopback and
# stopped after: tests/fleet/store_check.c's checks (S3 calls, chunks, manifests, a second
# snapshot's upload, corrupt and swapped chunks named, another workspace refused, the cache).
#
#   store.sh STORE_CHECK SNAP_CHECK
#
# then snap_check.c's: a snapshot pushed by one host and pulled by another (their own
# SANDBOX_HOMEs and keys), its refusals.
set -euo pipefail
check=$1 snap=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/service.sh"
work=$(mktemp -d /var/tmp/fleet-store.XXXXXX) # ext4 here: Swift's object server wants xattrs
start_service 90 "swift-s3 endpoint=" /usr/bin/python3 "$here/swift_s3.py" "$work/swift" \
	--port $((20000 + RANDOM % 20000))
set -- $service_line
endpoint=${2#endpoint=} access=${3#access=} secret=${4#secret=} region=${5#region=}
"$check" "$endpoint" "$access" "$secret" "$region" "$work"
"$snap" "$endpoint" "$access" "$secret" "$region" "$work"
