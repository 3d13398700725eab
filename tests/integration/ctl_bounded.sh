#!/bin/sh
# sandboxctl with a deadline: every call of the guest tests goes through this, so a step that
# hangs fails with status 137 and the test names it, instead of the whole test stalling until
# the emulated host's timeout says nothing about where.
#
# usage: CTL_REAL=PATH [CTL_DEADLINE=SEC] ctl_bounded.sh ARGS...   (default 120 s)
exec timeout -s KILL "${CTL_DEADLINE:-120}" "$CTL_REAL" "$@"
