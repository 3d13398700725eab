#!/bin/bash
# Placement on a three-node NATS JetStream cluster, started here on loopback and stopped
# after: tests/fleet/place_check.c's checks (redelivery before and after a claim, spread by
# capacity, unschedulable).
#
#   place.sh PLACE_CHECK
set -euo pipefail
check=$1
work=$(mktemp -d /var/tmp/fleet-place.XXXXXX)
here=$(cd "$(dirname "$0")" && pwd)
port=$((20000 + RANDOM % 20000))
coproc NATS { exec python3 "$here/nats_cluster.py" "$work" --nodes 3 --port "$port" 2>&1; }
cleanup() {
	exec {NATS[1]}>&- 2>/dev/null || true # stdin's end: nats_cluster.py stops the nodes
	wait "$NATS_PID" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
read -r -t 60 line <&"${NATS[0]}" || { echo "place.sh: NATS did not start" >&2; exit 1; }
case $line in
"nats servers="*) ;;
*)
	echo "place.sh: NATS: $line" >&2
	exit 1
	;;
esac
set -- $line
"$check" "${2#servers=}"
