#!/bin/sh
# sandboxctl on a host where no sandbox boots: create, run and start refuse at once with exit
# status 125 and a message naming the host and what works there, before any sandbox directory
# or VMM exists; SANDBOX_SKIP_HOST_CHECK=1 still starts the VMM.
#
# usage: host_refusal.sh SANDBOXCTL
# The same on every machine: the test runs itself under tools/hide-kvm, so this host shows no
# /dev/kvm (as some of ours have none, docs/hosts.md); test_sandboxctl_host covers the decision
# for each KVM flavour. The VMM is a stand-in (SANDBOX_VMM) that only records that it was
# started, so the test sees whether sandboxctl got that far.
set -u
ctl=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
[ -e /dev/kvm ] && exec "$top/tools/hide-kvm" "$0" "$@"
unset SANDBOX_SKIP_HOST_CHECK
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$top/tests/integration/check_lib.sh"

SANDBOX_HOME=$tmp/home
export SANDBOX_HOME
printf '#!/bin/sh\necho "$$" >>"%s/vmm-started"\n' "$tmp" >"$tmp/vmm"
chmod +x "$tmp/vmm"
export SANDBOX_VMM=$tmp/vmm
head -c 65536 /dev/zero >"$tmp/file"
"$ctl" images import busybox --kernel "$tmp/file" --initrd "$tmp/file" --rootfs "$tmp/file" ||
	fail "images import"
printf 'image: busybox\nsteps:\n  - name: hi\n    run: echo hi\n' >"$tmp/job.yaml"

ms() { echo $(($(date +%s%N) / 1000000)); }

# refused WHAT ARGS...: exit status 125 in under 3 s, the message, no VMM, no sandbox left.
refused() {
	what=$1
	shift
	t0=$(ms)
	"$ctl" "$@" >"$tmp/out" 2>&1
	st=$?
	took=$(($(ms) - t0))
	cat "$tmp/out"
	[ "$st" = 125 ] || fail "$what: exit status $st, expected 125"
	[ "$took" -lt 3000 ] || fail "$what took $took ms (at most 3000)"
	grep -q "no usable /dev/kvm" "$tmp/out" || fail "$what: no reason given"
	grep -q "tools/dev run JOB.yaml" "$tmp/out" || fail "$what: does not say what works here"
	grep -q "SANDBOX_SKIP_HOST_CHECK=1" "$tmp/out" || fail "$what: does not name the override"
	[ -e "$tmp/vmm-started" ] && fail "$what started a VMM"
	echo "ok: $what refused in $took ms, no VMM started"
}

refused create create --image busybox
[ -z "$(ls -A "$SANDBOX_HOME/sandboxes" 2>/dev/null)" ] ||
	fail "create left $(ls -A "$SANDBOX_HOME/sandboxes")"
refused run run "$tmp/job.yaml"

# With the override the VMM is started (the stand-in exits at once: create --no-wait does not
# wait for an agent, so the sandbox is left dead).
id=$(SANDBOX_SKIP_HOST_CHECK=1 "$ctl" create --image busybox --no-wait) ||
	fail "create with SANDBOX_SKIP_HOST_CHECK=1: status $?"
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$tmp/vmm-started" ] && break; sleep 0.1; done
[ -s "$tmp/vmm-started" ] || fail "SANDBOX_SKIP_HOST_CHECK=1 did not start the VMM"
echo "ok: SANDBOX_SKIP_HOST_CHECK=1 started the VMM"
rm -f "$tmp/vmm-started"

# start of that (dead) sandbox is refused the same way.
refused start start "$id"
"$ctl" rm -f "$id" >/dev/null 2>&1
echo "ok: host refusal"
