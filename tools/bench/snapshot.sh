#!/bin/bash
# The snapshot benchmark (tools/dev bench snapshot): bench-snapshot with this build's VMM and
# payload-snap, natively (a payload needs no Linux guest). Every VMM and file it makes it
# removes again. Its last two lines on stdout:
#   snapshot restore_ms=.. fork1_ms=.. fork16_ms=.. parent_pause_ms=.. snapshot_ms=.. cold_start_ms=..
#   density forks=16 own_mib_total=.. own_mib_per_fork=.. memavailable_drop_mib=..
#
# usage: snapshot.sh BUILD_DIR [bench-snapshot's options: --runs N, --dir DIR, ...]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [--runs N] [--dir DIR] ..." >&2; exit 2; }
build=$1
shift
exec "$build/tools/bench/bench-snapshot" --vmm "$build/vmm/sandbox-vmm" \
	--payload "$build/tests/guests/payload-snap" "$@"
