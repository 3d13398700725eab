#!/bin/sh
# payload-smp with N vCPUs, expecting what this host's probe says of guest cpuid: where
# `sandbox-vmm --check` says it traps (always on hardware KVM), the payload must report
# cpuid=trapped, having checked every vCPU's CPUID against the VMM's table; where it says cpuid
# runs on the host CPU, cpuid=native. So a guest that stopped seeing the VMM's table cannot
# pass as "native" on a host where cpuid traps.
#
# usage: payload_smp.sh VMM PAYLOAD NCPUS MASK   (MASK: the apic_mask in hex, e.g. 0xf)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/check_lib.sh"
vmm=$1 payload=$2 ncpus=$3 mask=$4
[ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "SKIP: /dev/kvm is not usable here"; exit 77; }
check=$("$vmm" --check 2>&1)
case $check in
*"guest cpuid traps"*) want=trapped ;;
*"guest cpuid does not trap"*) want=native ;;
*) fail "sandbox-vmm --check did not say whether guest cpuid traps: $check" ;;
esac
echo "this host: guest cpuid is $want (sandbox-vmm --check)"
exec "$here/expect.sh" --grep "^smp: vcpus=$ncpus apic_mask=$mask cpuid=$want ok\$" -- \
	"$vmm" --payload "$payload" --cpus "$ncpus"
