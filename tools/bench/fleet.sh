#!/bin/bash
# bench fleet: the fleet's figures (issue 31; docs/benchmarks.md "The fleet") on a three-node
# NATS JetStream cluster started here on loopback (tests/fleet/nats_cluster.py) and stopped
# after. Needs no guest: placement is measured natively on any machine.
#
#   fleet.sh BUILD [--creates N]
#
# So far the placement part: bench-fleet-place's last line,
#   fleet place_p50_ms= place_p99_ms= bare_p50_ms= bare_p99_ms= place_over_bare_p99= n= where=native
# (the restore and snapshot figures of the issue's line come with the store's restore).
set -euo pipefail
build=$1
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/fleet/service.sh"
work=$(mktemp -d /var/tmp/bench-fleet.XXXXXX)
start_service 60 "nats servers=" python3 "$top/tests/fleet/nats_cluster.py" "$work" --nodes 3 \
	--port $((20000 + RANDOM % 20000))
servers=$(set -- $service_line && echo "${2#servers=}")
out=$("$build/tools/bench/bench-fleet-place" "$servers" "$@")
echo "$out where=native"
