#!/bin/sh
# The one routing rule of every test (and benchmark) that runs a guest: natively where this
# host's /dev/kvm can run that guest, else inside the emulated KVM host (tools/devhost), whose
# /dev/kvm runs payloads and Linux guests alike.
#
# usage: route.sh BUILD [--linux] [--alone] [--own-l1] [--timeout SEC] [--memory MiB]
#                 [--add PATH]... [-e NAME=VAL]... [--forward HOSTPORT:GUESTPORT]... -- CMD [ARG...]
#
#   --linux    CMD boots Linux guests (default: payload guests, or none but the VMM's checks)
#   --alone    natively, no other guest test runs beside CMD (its figures are timings, or its
#              guests take every CPU); Linux guests are always alone natively
#   --emulated always in the emulated host: for a test of the emulated host's own KVM
#   --cgroup-v1  in an emulated host of its own whose cgroups are v1 (each controller apart)
#   --own-l1   an emulated host of its own (tools/devhost/run) rather than the shared one of
#              tools/devhost/pool: for a command that changes L1 itself
#   --timeout  each attempt's bound (default 600 s); --memory, --add, -e: as tools/devhost/run
#   --forward  in the emulated host, this host's 127.0.0.1:HOSTPORT reaches L1's GUESTPORT (a
#              server CMD starts there, for clients here: tools/devhost/run --forward), in an
#              L1 of its own; natively nothing (CMD runs here: its server is on this loopback)
#
# Where, from `sandbox-vmm --check` (docs/hosts.md): 0, hardware KVM: everything here; 3,
# kvm-pvm: payloads here, Linux in the emulated host; anything else (no /dev/kvm, or none we
# can use): everything in the emulated host. Inside the emulated host (its KVM is kvm_amd) the
# answer is 0, so CMD runs there as it would on hardware. The first line says where:
# `route: where=native|emulated (why)`.
#
# In the emulated host, a run cut by it (124: L1 hung or went silent; tools/devhost/run says
# which) is tried again, up to three attempts, and one whose CMD says it failed there (75: a
# nested guest hung or triple-faulted, guest_lib.sh) once more: a real bug fails twice, and a
# retried test says so in its log (and in BUILD/meson-logs/devhost.log). Exits 77 (skipped)
# only where neither way is possible (no QEMU, or no emulated-host image), saying which.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$1
shift
linux=0 alone=0 own=0 forced="" timeout=600 opts="" envs="" fwds=""
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
while [ $# -gt 0 ]; do
	case $1 in
	--linux) linux=1 alone=1; shift ;;
	--alone) alone=1; shift ;;
	--own-l1) own=1; shift ;;
	--emulated) forced=emulated; shift ;;
	--cgroup-v1) forced=emulated own=1 opts="$opts --cgroup v1"; shift ;;
	--timeout) timeout=$2; shift 2 ;;
	--memory | --add) opts="$opts $1 $(q "$2")"; shift 2 ;;
	-e) opts="$opts $1 $(q "$2")" envs="$envs $(q "$2")"; shift 2 ;;
	--forward) fwds="$fwds $1 $(q "$2")" own=1; shift 2 ;;
	--) shift; break ;;
	*) echo "route.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "route.sh: no command" >&2; exit 2; }

"$build/vmm/sandbox-vmm" --check >/dev/null 2>&1
check=$?
case $check in
0) where=native why="this host's KVM runs every guest" ;;
3) if [ "$linux" = 1 ]; then
	where=emulated why="this host's KVM is kvm-pvm, on which Linux does not boot"
else
	where=native why="kvm-pvm runs payload guests"
fi ;;
*) where=emulated why="no usable /dev/kvm here" ;;
esac
[ -z "$forced" ] || where=emulated why="the test is of the emulated host's own KVM"
echo "route: where=$where ($why)"
if [ "$where" = native ]; then
	args=""
	for a in "$@"; do args="$args $(q "$a")"; done
	lock=-s
	[ "$alone" = 0 ] || lock=-x
	# (where the build dir is read-only, as it may be for a command run by hand, no lock)
	[ -w "$build" ] || lock=""
	# timeout first, exec'ed: it stays in meson's process group (a session leader cannot
	# leave it), so meson's kill reaches the lock's waiter and CMD alike, and the wait for
	# the lock counts against the bound; -o: CMD does not hold the lock's fd.
	eval "exec timeout -k 5 \"\$timeout\" ${lock:+flock -o $lock \"\$build/.route-native\"} env$envs$args"
fi

image=${SANDBOX_CACHE:-${SANDBOX_HOME:-/var/lib/sandbox}/cache}/devhost/current
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "SKIP: needs the emulated KVM host ($why), and qemu-system-x86_64 is not installed (tools/dev setup installs it)"; exit 77; }
[ -e "$image/vmlinuz" ] ||
	{ echo "SKIP: needs the emulated KVM host ($why), and it has no image in $image (tools/dev setup builds it)"; exit 77; }

# In L1 a payload test runs on L1's last CPU (a pool's L1 has one), as sandboxctl's VMMs do there
# (tools/devhost/vmm-pinned): a nested guest whose vCPU thread moves between L1's CPUs now and
# then triple-faults (docs/hosts.md, "The emulated host's triple faults"). A Linux-guest test
# keeps every CPU of its L1 (the pool's have one; an own L1 two) for its own programs
# (servers, proxies, clients): its sandboxes' VMMs are pinned by sandboxctl there.
what=""
for a in "$@"; do what="$what $(q "$a")"; done
[ "$linux" = 1 ] || set -- sh -c 'n=$(nproc); exec taskset -c $((n - 1)) "$@"' pinned "$@"
log=$build/meson-logs/devhost.log
mkdir -p "$build/meson-logs"
args=""
for a in "$@"; do args="$args $(q "$a")"; done
failed75=0
attempt=1
while :; do
	if [ "$own" = 1 ]; then
		echo "$(date +%T) boot own-l1 for:$what" >>"$log"
		# run shares the build dir; the checkout's tests (expect.sh and the like) go too.
		eval "\"$top/tools/devhost/run\" --timeout \"$timeout\" --build \"$build\" --add \"$top/tests\" $opts$fwds --$args"
	else
		eval "\"$top/tools/devhost/pool\" exec --timeout \"$timeout\" --build \"$build\" $opts --$args"
	fi
	st=$?
	case $st in
	124) why="the emulated host timed out or hung (124)" ;;
	75) [ "$failed75" = 0 ] || exit 75
		failed75=1 why="the command failed in the emulated host (75)" ;;
	*) exit "$st" ;;
	esac
	[ "$attempt" = 3 ] && exit "$st"
	echo "route: attempt $attempt: $why; trying again"
	echo "$(date +%T) retry after attempt $attempt ($why):$what" >>"$log"
	attempt=$((attempt + 1))
done
