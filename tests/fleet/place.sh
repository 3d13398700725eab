#!/bin/bash
# Placement on a three-node NATS JetStream cluster, started here on loopback and stopped
# after: tests/fleet/place_check.c's checks (redelivery before and after a claim, a box placed
# twice at once, malformed creates, spread by capacity, unschedulable).
#
#   place.sh PLACE_CHECK
set -euo pipefail
check=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/service.sh"
work=$(mktemp -d /var/tmp/fleet-place.XXXXXX)
start_service 60 "nats servers=" python3 "$here/nats_cluster.py" "$work" --nodes 3 \
	--port $((20000 + RANDOM % 20000))
set -- $service_line
"$check" "${2#servers=}"
