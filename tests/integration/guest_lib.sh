# The guest tests' harness, sourced by each test that drives a real guest through sandboxctl.
# One harness for every guest test, in three parts:
#   - where: tests/integration/route.sh runs the test's checks natively where this host's KVM
#     runs its guest, else in the emulated KVM host (shared by the tests, tools/devhost/pool);
#     sandbox_guest.sh builds the busybox image and routes a test's `--inner` checks there;
#   - checks: check_lib.sh (fail, check, refuse, checks_end: one failure report, what failed,
#     each sandbox's console and the logs a test names), and ctl_bounded.sh, the sandboxctl
#     every check calls, which kills a step that hangs;
#   - retry: in the emulated host, a run L1 cut (124) is tried again by route.sh, up to three
#     attempts, and one that failed there (fail() exits 75) once more; route.sh says so in
#     the test's log and in BUILD/meson-logs/devhost.log. Natively nothing is retried.

# (each test that sources this file has set $here to its directory, tests/integration)
. "$here/check_lib.sh"

# guest_home CTL KERNEL INITRD ROOTFS: a fresh $SANDBOX_HOME with the busybox image imported
# from those files. At exit every sandbox left in it is removed with CTL (rm -f), then the
# directory.
guest_home() {
	guest_home_ctl=$1
	SANDBOX_HOME=$(mktemp -d)
	export SANDBOX_HOME
	trap guest_home_cleanup EXIT
	"$1" images import busybox --kernel "$2" --initrd "$3" --rootfs "$4" || fail "images import"
}

guest_home_cleanup() {
	for d in "$SANDBOX_HOME"/sandboxes/*/; do
		[ -d "$d" ] && "$guest_home_ctl" rm -f "$(basename "$d")" >/dev/null 2>&1
	done
	rm -rf "$SANDBOX_HOME"
}
