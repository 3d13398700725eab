#!/bin/sh
# vsock throughput through sandboxctl, in a busybox sandbox: MiB/s guest to host (exec's stdout,
# cp out) and host to guest (exec -i's stdin, cp in). Where Linux guests boot only in the
# emulated KVM host, run it there:
#   tools/devhost/run --timeout 600 --add tools/bench --add "$(dirname "$rootfs")" -- \
#     tools/bench/vsock.sh build/tools/sandboxctl/sandboxctl KERNEL INITRD ROOTFS [MIB]
# (rootfs from guest/image/busybox.sh build/guest/sandbox-init). Last line:
#   vsock mib=N exec_out_mibs=.. exec_in_mibs=.. cp_in_mibs=.. cp_out_mibs=..
set -eu
ctl=$1 kernel=$2 initrd=$3 rootfs=$4 mib=${5:-100}
SANDBOX_HOME=$(mktemp -d)
export SANDBOX_HOME
trap '"$ctl" rm -f "$id" >/dev/null 2>&1; rm -rf "$SANDBOX_HOME"' EXIT
id=
"$ctl" images import busybox --kernel "$kernel" --initrd "$initrd" --rootfs "$rootfs" >/dev/null
id=$("$ctl" create --image busybox --memory $((mib * 2 + 256)) --timeout 120)
"$ctl" exec "$id" -- mount -o remount,size=$((mib + 16))m /tmp

now() { cut -d' ' -f1 /proc/uptime; }
# count: the bytes on stdin (busybox's wc -c is far slower than the stream it counts, and its
# dd does not print a byte count)
count() { dd of="$SANDBOX_HOME/sink" bs=256k 2>/dev/null; stat -c %s "$SANDBOX_HOME/sink"; rm "$SANDBOX_HOME/sink"; }
# rate LABEL START END: MiB/s over mib MiB, also said on stderr
rate() {
	r=$(echo "$2 $3" | awk -v m="$mib" '{ d = $2 - $1; printf "%.2f", m / d }')
	echo "$1: $mib MiB in $(echo "$2 $3" | awk '{ printf "%.2f", $2 - $1 }') s = $r MiB/s" >&2
	echo "$r"
}

t0=$(now)
n=$("$ctl" exec "$id" -- dd if=/dev/zero bs=64k count=$((mib * 16)) 2>/dev/null | count)
t1=$(now)
[ "$n" = $((mib << 20)) ] || { echo "exec out: $n bytes" >&2; exit 1; }
out=$(rate "exec out (dd | dd)" "$t0" "$t1")

t0=$(now)
n=$(dd if=/dev/zero bs=64k count=$((mib * 16)) 2>/dev/null | "$ctl" exec -i "$id" -- \
	sh -c 'dd of=/tmp/sink bs=64k 2>/dev/null; stat -c %s /tmp/sink; rm /tmp/sink')
t1=$(now)
[ "$n" = $((mib << 20)) ] || { echo "exec in: $n bytes" >&2; exit 1; }
in=$(rate "exec -i in (dd | dd)" "$t0" "$t1")

t0=$(now)
dd if=/dev/zero bs=64k count=$((mib * 16)) 2>/dev/null | "$ctl" cp - "$id:/tmp/big"
t1=$(now)
cpin=$(rate "cp in" "$t0" "$t1")

t0=$(now)
n=$("$ctl" cp "$id:/tmp/big" - | count)
t1=$(now)
[ "$n" = $((mib << 20)) ] || { echo "cp out: $n bytes" >&2; exit 1; }
cpout=$(rate "cp out" "$t0" "$t1")

echo "vsock mib=$mib exec_out_mibs=$out exec_in_mibs=$in cp_in_mibs=$cpin cp_out_mibs=$cpout"
