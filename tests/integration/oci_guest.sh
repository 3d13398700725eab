#!/bin/sh
# An image imported from an OCI archive (oci_make.py: 3 layers, the host's static busybox, a
# whiteout, an opaque directory, a setuid file of uid 1000, Env, WorkingDir, User, Entrypoint,
# Cmd) boots and runs with its config (in the emulated host on kvm-pvm):
# - images import --oci on this host (the emulated host has no e2fsprogs), with the busybox
#   image's kernel and initrd;
# - create --image NAME --network none boots it; exec sees its files (the whiteout's file
#   absent, the opaque directory's lower entries gone, the setuid file 4755 1000);
# - exec's env holds the image's Env, pwd is its WorkingDir, id -u its User; --env, --cwd and
#   --user 0 override them; exec ID with no command runs Entrypoint + Cmd;
# - a job spec of that image runs its steps with the same defaults.
#
# usage: oci_guest.sh SANDBOXCTL VMM KERNEL INITRD (sandbox_guest.sh runs it with --inner)
# shellcheck disable=SC2016 # the guest's shell expands what the commands hold, not ours
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

# want WHAT EXPECTED COMMAND...: COMMAND's output is EXPECTED.
want() {
	what=$1 expected=$2
	shift 2
	got=$("$@" 2>&1) || fail "$what: status $?: $got"
	[ "$got" = "$expected" ] || fail "$what: '$got', not '$expected'"
	echo "ok: $what: $got"
}

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	export CTL_REAL
	ctl=$here/ctl_bounded.sh # a hung step fails with status 137 instead of stalling
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	# imported on the host (the emulated host has no e2fsprogs' mke2fs): the image's directory
	[ -f "${OCI_IMAGE:-}/rootfs" ] || fail "no imported image in OCI_IMAGE=${OCI_IMAGE:-}"
	[ -f "$OCI_IMAGE/exec.conf" ] || fail "no exec.conf in $OCI_IMAGE"
	cp -a "$OCI_IMAGE" "$SANDBOX_HOME/images/ocitest" || fail "cp of the image"
	id=$("$ctl" create --image ocitest --memory 256 --timeout 120 --network none) ||
		fail "create (status $?)"

	want "the image's file" kept "$ctl" exec "$id" -- cat /keep.txt
	want "the whiteout" absent "$ctl" exec "$id" -- sh -c 'test -e /gone.txt && echo present || echo absent'
	want "the opaque directory" new "$ctl" exec "$id" -- ls /opq
	want "the setuid file" "4755 1000 1000" "$ctl" exec "$id" -- stat -c '%a %u %g' /app/suid
	want "the hard link" "2" "$ctl" exec "$id" -- stat -c '%h' /app/hard
	want "the symlink" oci-test "$ctl" exec "$id" -- cat /app/link
	want "the image's Env" "hello world test" "$ctl" exec "$id" -- sh -c 'echo "$GREETING $APP_MODE"'
	"$ctl" exec "$id" -- env >"$SANDBOX_HOME/env.out" 2>&1 || fail "env: $(cat "$SANDBOX_HOME/env.out")"
	for line in 'GREETING=hello world' 'APP_MODE=test' 'HOME=/' 'LANG=C.UTF-8'; do
		grep -qx "$line" "$SANDBOX_HOME/env.out" || fail "env has no $line: $(cat "$SANDBOX_HOME/env.out")"
	done
	echo "ok: env: $(tr '\n' ' ' <"$SANDBOX_HOME/env.out")"
	want "--env over the image's Env" bye "$ctl" exec -e GREETING=bye "$id" -- sh -c 'echo $GREETING'
	want "the WorkingDir" /app/work "$ctl" exec "$id" -- pwd
	want "--cwd over it" /tmp "$ctl" exec -w /tmp "$id" -- pwd
	want "the User" "1000 1000" "$ctl" exec "$id" -- sh -c 'echo $(id -u) $(id -g)'
	want "--user 0" "0 0 /root" "$ctl" exec --user 0 "$id" -- sh -c 'echo $(id -u) $(id -g) $HOME'
	want "--user 5:7" "5 7" "$ctl" exec -u 5:7 "$id" -- sh -c 'echo $(id -u) $(id -g)'
	want "exec with no command: Entrypoint + Cmd" "entrypoint ran as 1000 in /app/work" \
		"$ctl" exec "$id"
	"$ctl" rm -f "$id" >/dev/null || fail "rm -f"

	printf 'image: ocitest\nmemory: 256\nnetwork: none\nsteps:\n  - name: defaults\n    run: echo "$(id -u) $(pwd) $GREETING"\n  - name: workdir\n    workdir: /tmp\n    env: {GREETING: step}\n    run: echo "$(pwd) $GREETING"\n' \
		>"$SANDBOX_HOME/job.yaml"
	"$ctl" run "$SANDBOX_HOME/job.yaml" >"$SANDBOX_HOME/run.out" 2>&1 ||
		fail "run: $(cat "$SANDBOX_HOME/run.out")"
	for line in '1000 /app/work hello world' '/tmp step'; do
		grep -qx "$line" "$SANDBOX_HOME/run.out" || fail "run: no '$line': $(cat "$SANDBOX_HOME/run.out")"
	done
	echo "ok: a job's steps run with the image's user, workdir and Env, under the step's own"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
# The archive is made and imported here, where python3 and e2fsprogs are; the image's
# directory is handed to the emulated host.
[ "$#" = 4 ] || { echo "usage: $0 SANDBOXCTL VMM KERNEL INITRD"; exit 2; }
[ -e "$3" ] || { echo "SKIP: guest kernel $3 not built (run tools/dev setup)"; exit 77; }
work=$(mktemp -d /tmp/oci-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$here/oci_make.py" "$work/arch" /bin/busybox || fail "oci_make.py"
t0=$(date +%s%N)
SANDBOX_HOME=$work/home "$1" images import ocitest --oci "$work/arch/good-oci.tar" \
	--kernel "$3" --initrd "$4" >"$work/import.out" 2>&1 || {
	fail "import: $(cat "$work/import.out")"
}
echo "ok: imported in $((($(date +%s%N) - t0) / 1000000)) ms: $(grep '^image ocitest:' "$work/import.out")"
OCI_IMAGE=$work/home/images/ocitest
SANDBOX_GUEST_DEVHOST="${SANDBOX_GUEST_DEVHOST:-} --add $OCI_IMAGE -e OCI_IMAGE=$OCI_IMAGE"
export OCI_IMAGE SANDBOX_GUEST_DEVHOST
"$here/sandbox_guest.sh" "$here/oci_guest.sh" "$@"
