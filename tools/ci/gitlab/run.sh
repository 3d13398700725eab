#!/bin/sh
# GitLab Runner custom executor, run stage (run_exec): one of the job's scripts in its
# sandbox. usage: run.sh SCRIPT STAGE   (the runner's arguments)
#
# The script (which the runner wrote, and which holds the job's variables) is copied into
# the guest with the job token replaced by a placeholder (the proxy adds the real one, see
# prepare.sh), then run there with bash (sh when the guest has none). Its failure is the
# job's: exit $BUILD_FAILURE_EXIT_CODE, its status in $BUILD_EXIT_CODE_FILE; a sandbox that is
# gone or a copy that fails is ours: $SYSTEM_FAILURE_EXIT_CODE.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/base.sh"

script=${1-} stage=${2-}
[ -f "$script" ] || system_failure "run.sh: no script '$script'"
case $stage in '' | *[!a-z0-9_]*) system_failure "run.sh: a stage name '$stage'" ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/sandbox-gitlab.XXXXXX") || system_failure "mktemp"
trap 'rm -rf "$work"' EXIT
# Every occurrence of the token, wherever it is (CI_JOB_TOKEN, CI_REPOSITORY_URL, ...). The
# token goes to awk through its environment, not its arguments (/proc/PID/cmdline is anyone's
# to read); awk exits 3 if any is left.
T=${CUSTOM_ENV_CI_JOB_TOKEN:-} R=$token_placeholder awk '
	BEGIN { t = ENVIRON["T"]; r = ENVIRON["R"] }
	t == "" { print; next }
	{ out = ""; while ((i = index($0, t)) > 0) { out = out substr($0, 1, i - 1) r; $0 = substr($0, i + length(t)) }; print out $0 }
' "$script" >"$work/script" || system_failure "cannot prepare the $stage script"
T=${CUSTOM_ENV_CI_JOB_TOKEN:-} awk 'BEGIN { t = ENVIRON["T"] } t != "" && index($0, t) { exit 3 }' \
	"$work/script" || system_failure "the job token is still in the $stage script"
"$ctl" cp "$work/script" "$sandbox:/tmp/gitlab-$stage.sh" >/dev/null ||
	system_failure "cannot copy the $stage script into $sandbox (status $?)"
"$ctl" exec "$sandbox" -- sh -c \
	'if command -v bash >/dev/null 2>&1; then exec bash "$0"; fi; exec sh "$0"' \
	"/tmp/gitlab-$stage.sh"
st=$?
[ "$st" = 0 ] && exit 0
# The script's failure, or the sandbox's? A sandbox that still answers ran the script.
if "$ctl" exec "$sandbox" -- true >/dev/null 2>&1; then
	[ -z "${BUILD_EXIT_CODE_FILE:-}" ] || echo "$st" >"$BUILD_EXIT_CODE_FILE"
	exit "${BUILD_FAILURE_EXIT_CODE:-1}"
fi
system_failure "$sandbox stopped answering during $stage (status $st)"
