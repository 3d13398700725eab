#!/bin/sh
# GitLab Runner custom executor, cleanup stage (cleanup_exec): the job's sandbox removed,
# whatever the job did (the runner calls it after a failure too, and does not fail the job
# on its status).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/base.sh"

if "$ctl" ls 2>/dev/null | awk '{ print $2 }' | grep -qx "$sandbox"; then
	"$ctl" rm -f "$sandbox" >/dev/null || echo "sandbox executor: rm -f $sandbox failed" >&2
fi
exit 0
