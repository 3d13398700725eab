#!/bin/bash
# bench fleet: the fleet's figures (issue 31; docs/benchmarks.md "The fleet") on a three-node
# NATS JetStream cluster started here on loopback (tests/fleet/nats_cluster.py) and stopped
# after. Needs no guest: placement is measured natively on any machine.
#
#   fleet.sh BUILD [--creates N]
#
# The placement part natively (bench-fleet-place's line: fleet place_p50_ms= place_p99_ms=
# bare_p50_ms= bare_p99_ms= place_over_bare_p99= n= where=native), the store's transfers
# natively against Swift (bench-store-xfer's lines: store mib= chunk_kib= push_W_ms= pull_W_ms=
# ... push_speedup= pull_speedup= where=native, at 1 MiB and 256 KiB chunks), then the restore part where
# Linux guests boot (tools/bench/fleet_restore.py on the fleet-api topology, with Swift). Last
# line: fleet place_p50_ms= place_p99_ms= restore_local_ms= restore_eager_ms=
# restore_lazy_ms= lazy_fetched_ratio= second_snapshot_ratio= chunk_kib= place_where=native
# where=.
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
stop_service
# A snapshot file's push and pull, one chunk transfer at a time against several (sandboxd
# --store-transfers), against Swift's S3 API on loopback; natively, as no guest is in it.
work=$(mktemp -d /var/tmp/bench-fleet.XXXXXX)
start_service 150 "swift-s3 endpoint=" python3 "$top/tests/fleet/swift_s3.py" "$work/swift" \
	--port $((20000 + RANDOM % 20000))
read -r -a sl <<<"$service_line" # swift-s3 endpoint= access= secret= region=
for kib in 1024 256; do
	"$build/tools/bench/bench-store-xfer" "${sl[1]#endpoint=}" "${sl[2]#access=}" \
		"${sl[3]#secret=}" "${sl[4]#region=}" "$work" --mib 32 --chunk-kib $kib \
		--widths 1,4,8 | sed 's/$/ where=native/'
done
stop_service
# The restore figures: guests, so where Linux boots (the fleet-api topology, with Swift)
kdir=$(meson introspect "$build" --buildoptions 2>/dev/null |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="guest_kernel"))')
restore=$(FLEET_BENCH=1 "$top/tests/fleet/api.sh" "$build/sandboxd/sandboxd" \
	"$build/tools/sandboxctl/sandboxctl" "$build/vmm/sandbox-vmm" "$kdir/bzImage" \
	"$build/guest/initramfs.cpio" | tee /dev/stderr | grep '^fleet restore_local_ms=' | tail -1)
where=emulated # (Linux guests: natively only where sandbox-vmm --check says 0)
if "$build/vmm/sandbox-vmm" --check >/dev/null 2>&1; then where=native; fi
p50=$(sed -n 's/.*place_p50_ms=\([^ ]*\).*/\1/p' <<<"$out")
p99=$(sed -n 's/.*place_p99_ms=\([^ ]*\).*/\1/p' <<<"$out")
field() { # NAME=VALUE of the restore line, or NAME=na
	local v
	v=$(sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $restore")
	echo "$1=${v:-na}"
}
echo "fleet place_p50_ms=$p50 place_p99_ms=$p99 $(field restore_local_ms) $(field restore_eager_ms) $(field restore_lazy_ms) $(field lazy_fetched_ratio) $(field second_snapshot_ratio) $(field chunk_kib) place_where=native where=$where"
