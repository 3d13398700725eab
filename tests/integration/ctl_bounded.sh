#!/bin/sh
# sandboxctl with a deadline: every call of the guest tests goes through this, so a step that
# hangs fails with status 137 and the test names it, instead of the whole test stalling until
# the emulated host's timeout says nothing about where.
#
# Inside the emulated host ($DEVHOST set), whose nested guests hang now and then on their own
# (docs/hosts.md), a call that hit its deadline also leaves $SANDBOX_HOME/.hung: the test's
# fail() then exits 75, which route.sh retries once like an emulated-host timeout.
#
# usage: CTL_REAL=PATH [CTL_DEADLINE=SEC] ctl_bounded.sh ARGS...   (default 120 s)
timeout -s KILL "${CTL_DEADLINE:-120}" "$CTL_REAL" "$@"
st=$?
if [ "$st" = 137 ]; then
	echo "ctl_bounded: sandboxctl $1 hung for ${CTL_DEADLINE:-120} s: killed" >&2
	[ -z "${DEVHOST:-}" ] || [ -z "${SANDBOX_HOME:-}" ] || : >"$SANDBOX_HOME/.hung"
fi
exit "$st"
