# The checks of every integration script, sourced (guest_lib.sh sources it for the guest tests).
# One failure report for all of them:
#   fail MSG...         stop now: "FAIL: MSG", the logs named by fail_show and the end of each
#                       sandbox's console under $SANDBOX_HOME, then exit 1; 75 in the emulated
#                       host (route.sh runs such a run once more, saying so in the log)
#   fail_show FILE...   name logs the failure report shows (their last 30 lines)
#   check WHAT CMD...   CMD must succeed: "ok: WHAT", or "FAIL: WHAT" with CMD's last lines,
#                       counted, and the script goes on
#   refuse WHAT CMD...  CMD must fail, likewise
#   soft_fail MSG...    "FAIL: MSG", counted, and the script goes on
#   checks_end WHAT     fail if a counted check failed ("N WHAT check(s) failed")
#   own_netns ARGS...   re-run this script with ARGS in a network namespace of its own
#                       (unshare -n; 77 without unshare), lo up: the host's ruleset (the
#                       proxies' kernel guard, docs/hardening.md) never applies to the test,
#                       and nothing the test loads reaches the host's
# Exit statuses are route.sh's: 0 pass, 1 fail, 77 skip (only where this machine cannot serve
# the test, saying why), 75 a failure in the emulated host (retried once there).

check_failed=0
fail_logs=

fail_show() { fail_logs="$fail_logs $*"; }

fail() {
	echo "FAIL: $*"
	for f in $fail_logs; do
		[ -s "$f" ] && { echo "--- $f (last 30 lines)"; tail -n 30 "$f"; }
	done
	if [ -n "${SANDBOX_HOME:-}" ]; then
		for d in "$SANDBOX_HOME"/sandboxes/*/; do
			[ -f "$d/console.log" ] && { echo "--- $d"; tail -n 20 "$d/console.log"; }
		done
		# ctl_bounded.sh marks a sandboxctl step it had to kill
		[ -e "$SANDBOX_HOME/.hung" ] && exit 75
	fi
	# In the emulated host a nested guest now and then triple-faults with its memory intact,
	# or stops answering for a while (docs/hosts.md, "The emulated host's triple faults"): a
	# run that failed there is run once more (route.sh), so a real bug fails twice and a
	# flake of the emulation shows only as this line in the log.
	if [ -n "${DEVHOST:-}" ]; then
		grep -qs 'guest triple fault' $fail_logs "${SANDBOX_HOME:-/nonexistent}"/sandboxes/*/console.log &&
			echo "(a nested guest triple-faulted)"
		echo "failed in the emulated host: the run is retried once"
		exit 75
	fi
	exit 1
}

soft_fail() {
	echo "FAIL: $*"
	check_failed=$((check_failed + 1))
}

check() {
	check_what=$1
	shift
	if check_out=$("$@" 2>&1); then
		echo "ok: $check_what"
	else
		soft_fail "$check_what"
		[ -z "$check_out" ] || echo "$check_out" | tail -n 8 | sed 's/^/    /'
	fi
}

refuse() {
	check_what=$1
	shift
	if check_out=$("$@" 2>&1); then
		soft_fail "$check_what (it got through)"
		[ -z "$check_out" ] || echo "$check_out" | tail -n 8 | sed 's/^/    /'
	else
		echo "ok: $check_what"
	fi
}

checks_end() {
	echo "$check_failed check(s) failed"
	[ "$check_failed" = 0 ] || fail "$check_failed ${1:-} check(s) failed"
}

own_netns() {
	command -v unshare >/dev/null 2>&1 || { echo "skipped: no unshare"; exit 77; }
	if [ -z "${CHECK_OUTER_NETNS:-}" ]; then
		exec env CHECK_OUTER_NETNS="$(readlink /proc/self/ns/net)" unshare -n "$0" "$@"
	fi
	[ "$(readlink /proc/self/ns/net)" != "$CHECK_OUTER_NETNS" ] ||
		fail "still in the outer network namespace"
	ip link set lo up || fail "cannot bring up lo"
}
