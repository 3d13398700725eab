#!/bin/bash
# The store's collector in a fleet (fleet/lease.c, store/gc.c): a NATS node started here and
# Swift's S3 API (store.sh starts it), both on loopback and stopped after:
# tests/fleet/gc_check.c's checks (pushes' leases and collections' locks against each other,
# a dead holder's lease taken, a push racing a collection, a lost lease or lock acting on
# nothing); then, with SANDBOXD, gc_turns.py's (collections on a schedule, one host a turn).
#
#   gc.sh GC_CHECK [SANDBOXD]
set -euo pipefail
check=$1
sandboxd=${2-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/service.sh"
work=$(mktemp -d /var/tmp/fleet-gc.XXXXXX)
start_service 60 "nats servers=" python3 "$here/nats_cluster.py" "$work" --nodes 1 \
	--port $((20000 + RANDOM % 20000))
set -- $service_line
checks=("$check")
[ -z "$sandboxd" ] || checks+=("$here/gc_turns.py")
FLEET_NATS=${2#servers=} FLEET_SANDBOXD=$sandboxd "$here/store.sh" "${checks[@]}"
