# The guest tests' harness, sourced by each test that drives a real guest through sandboxctl.
# One harness for every guest test, in three parts:
#   - where: tests/integration/route.sh runs the test's checks natively where this host's KVM
#     runs its guest, else in the emulated KVM host (shared by the tests, tools/devhost/pool);
#     sandbox_guest.sh builds the busybox image and routes a test's `--inner` checks there;
#   - checks: fail() below (the failure report: what failed, each sandbox's console), and
#     ctl_bounded.sh, the sandboxctl every check calls, which kills a step that hangs;
#   - retry: in the emulated host, a run L1 cut (124) is tried again by route.sh, up to three
#     attempts, and one that failed there (fail() exits 75) once more; route.sh says so in
#     the test's log and in BUILD/meson-logs/devhost.log. Natively nothing is retried.

# fail MSG...: say so, show the end of each sandbox's console, and exit: 75 in the emulated host
# (a sandboxctl step that hung there, ctl_bounded.sh's .hung, or any other failure there;
# route.sh retries such a run once), else 1.
fail() {
	echo "FAIL: $*"
	for d in "$SANDBOX_HOME"/sandboxes/*/; do
		[ -f "$d/console.log" ] && { echo "--- $d"; tail -n 20 "$d/console.log"; }
	done
	[ -e "$SANDBOX_HOME/.hung" ] && exit 75
	# In the emulated host a nested guest now and then triple-faults with its memory intact,
	# or stops answering for a while (docs/hosts.md, "The emulated host's triple faults"): a
	# run that failed there is run once more (route.sh), so a real bug fails twice
	# and a flake of the emulation shows only as this line in the log.
	if [ -n "${DEVHOST:-}" ]; then
		grep -qs 'guest triple fault' "$SANDBOX_HOME"/sandboxes/*/console.log &&
			echo "(a nested guest triple-faulted)"
		echo "failed in the emulated host: the run is retried once"
		exit 75
	fi
	exit 1
}

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
