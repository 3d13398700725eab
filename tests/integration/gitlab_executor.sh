#!/bin/sh
# The GitLab Runner custom executor (tools/ci/gitlab, docs/ci.md) driven as the runner drives
# it: config, prepare, run for each script stage, cleanup, with the documented environment
# (CUSTOM_ENV_* job variables, BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE,
# BUILD_EXIT_CODE_FILE), on the busybox image. There is no gitlab-runner package here, so this
# holds the scripts to the contract:
# - config prints the JSON the runner reads (builds_dir, cache_dir, hostname, driver, shell,
#   and a random sandbox name in job_env for the later stages);
# - a job that names another GitLab host than the runner's --gitlab is refused (the token
#   would go there);
# - prepare makes the job's sandbox (its image from `image:`), run runs each stage's script in
#   it in order, and what one stage leaves the next sees;
# - the job token is in the scripts the runner writes but never in the guest (not in its
#   scripts, its environment or its disk): a placeholder stands there;
# - a failing script: exit $BUILD_FAILURE_EXIT_CODE, its status in $BUILD_EXIT_CODE_FILE;
# - a sandbox gone, or an image not installed: exit $SYSTEM_FAILURE_EXIT_CODE;
# - cleanup removes the sandbox, also after a failure.
#
# usage: gitlab_executor.sh SANDBOXCTL VMM KERNEL INITRD (sandbox_guest.sh runs it with --inner)
set -u
here=$(cd "$(dirname "$0")" && pwd)

. "$here/guest_lib.sh"

inner() {
	CTL_REAL=$1 kernel=$2 initrd=$3 rootfs=$4
	guest_home "$CTL_REAL" "$kernel" "$initrd" "$rootfs"
	gl=$GITLAB_EXECUTOR
	SANDBOXCTL=$CTL_REAL
	TMPDIR=$SANDBOX_HOME
	token=glcbt-64_s3cretJobT0ken
	CUSTOM_ENV_CI_JOB_ID=4242 CUSTOM_ENV_CI_JOB_TOKEN=$token
	CUSTOM_ENV_CI_SERVER_HOST=gitlab.example.test CUSTOM_ENV_CI_JOB_IMAGE=busybox
	BUILD_FAILURE_EXIT_CODE=71 SYSTEM_FAILURE_EXIT_CODE=72
	BUILD_EXIT_CODE_FILE=$SANDBOX_HOME/build-exit-code
	export SANDBOXCTL TMPDIR CUSTOM_ENV_CI_JOB_ID CUSTOM_ENV_CI_JOB_TOKEN CUSTOM_ENV_CI_SERVER_HOST
	export CUSTOM_ENV_CI_JOB_IMAGE BUILD_FAILURE_EXIT_CODE SYSTEM_FAILURE_EXIT_CODE BUILD_EXIT_CODE_FILE

	json=$("$gl/config.sh" --shell sh) || fail "config: status $?"
	# job_env: what the runner hands every later stage in their environment
	SANDBOX_NAME=$(printf '%s' "$json" | sed -n 's/.*"job_env": {"SANDBOX_NAME": "\([^"]*\)"}.*/\1/p')
	export SANDBOX_NAME
	for k in '"builds_dir": "/builds"' '"cache_dir": "/cache"' '"builds_dir_is_shared": false' \
		"\"hostname\": \"$SANDBOX_NAME\"" '"shell": "sh"' '"driver": {"name": "sandbox microVM", "version": "sandboxctl '; do
		printf '%s' "$json" | grep -qF "$k" || fail "config: no $k in $json"
	done
	case $SANDBOX_NAME in gitlab-????????????????) ;; *) fail "config: job_env's SANDBOX_NAME '$SANDBOX_NAME'" ;; esac
	[ "$("$gl/config.sh" | sed -n 's/.*"SANDBOX_NAME": "\([^"]*\)".*/\1/p')" != "$SANDBOX_NAME" ] ||
		fail "config: the same sandbox name twice"
	echo "ok: config prints the runner's JSON, a random sandbox name in job_env ($SANDBOX_NAME)"

	# A job that names another GitLab (its .gitlab-ci.yml may set CI_SERVER_HOST): refused.
	CUSTOM_ENV_CI_SERVER_HOST=evil.example.test "$gl/prepare.sh" --gitlab gitlab.example.test \
		--memory 256 >"$SANDBOX_HOME/prepare.out" 2>&1
	st=$?
	[ "$st" = 72 ] && grep -q "its GitLab is 'evil.example.test'" "$SANDBOX_HOME/prepare.out" ||
		fail "prepare with another CI_SERVER_HOST: status $st: $(cat "$SANDBOX_HOME/prepare.out")"
	[ -z "$(ls "$SANDBOX_HOME/sandboxes")" ] || fail "a refused prepare made a sandbox"
	timeout 300 "$gl/prepare.sh" --gitlab gitlab.example.test --memory 256 >"$SANDBOX_HOME/prepare.out" 2>&1 ||
		fail "prepare: status $?: $(cat "$SANDBOX_HOME/prepare.out")"
	"$CTL_REAL" ls | grep -q " $SANDBOX_NAME .*running.*busybox" || fail "prepare: no sandbox: $("$CTL_REAL" ls)"
	echo "ok: prepare made the job's sandbox (busybox, from image:); a job naming another GitLab is refused (72)"

	# The runner's scripts: the job's variables exported, the token among them.
	stage() { # NAME BODY: the script run.sh gets for stage NAME; its status in st
		cat >"$SANDBOX_HOME/$1.sh" <<SCRIPT
#!/usr/bin/env sh
set -eo pipefail
export CI_JOB_ID="4242"
export CI_JOB_TOKEN="$token"
export CI_REPOSITORY_URL="https://gitlab-ci-token:$token@gitlab.example.test/g/p.git"
$2
SCRIPT
		timeout 300 "$gl/run.sh" "$SANDBOX_HOME/$1.sh" "$1" >"$SANDBOX_HOME/$1.out" 2>&1
		st=$?
	}
	stage prepare_script 'echo "Running on $(hostname) via sandbox"'
	[ "$st" = 0 ] || fail "prepare_script: status $st: $(cat "$SANDBOX_HOME/prepare_script.out")"
	stage get_sources 'mkdir -p /builds/g/p && cd /builds/g/p && echo "$CI_REPOSITORY_URL" >.git-url && echo fetched'
	[ "$st" = 0 ] && grep -q '^fetched$' "$SANDBOX_HOME/get_sources.out" ||
		fail "get_sources: status $st: $(cat "$SANDBOX_HOME/get_sources.out")"
	stage step_script 'cd /builds/g/p; echo "url=$(cat .git-url)"; echo "token=$CI_JOB_TOKEN"
a=glcbt-; b=64_s3cret # the token, but not in this script'"'"'s text
echo "found=$(grep -rl "$a$b" /tmp /builds /root /etc 2>/dev/null | wc -l) env=$(env | grep -c "$a$b")"'
	out=$(cat "$SANDBOX_HOME/step_script.out")
	[ "$st" = 0 ] || fail "step_script: status $st: $out"
	printf '%s\n' "$out" | grep -q '^url=https://gitlab-ci-token:sandbox-proxy-adds-the-job-token@gitlab.example.test/g/p.git$' ||
		fail "step_script: what came from get_sources: $out"
	printf '%s\n' "$out" | grep -q '^token=sandbox-proxy-adds-the-job-token$' || fail "step_script: the token's placeholder: $out"
	printf '%s\n' "$out" | grep -q '^found=0 env=0$' || fail "step_script: the token is in the guest: $out"
	grep -q glcbt-64 "$SANDBOX_HOME/step_script.out" && fail "the token came back in the output"
	echo "ok: prepare_script, get_sources and step_script ran in order; the job token never entered the guest"

	stage after_script 'echo after; exit 3'
	[ "$st" = 71 ] || fail "a failing script: status $st, not BUILD_FAILURE_EXIT_CODE 71: $(cat "$SANDBOX_HOME/after_script.out")"
	[ "$(cat "$BUILD_EXIT_CODE_FILE" 2>/dev/null)" = 3 ] || fail "BUILD_EXIT_CODE_FILE: '$(cat "$BUILD_EXIT_CODE_FILE" 2>&1)'"
	echo "ok: a failing script exits BUILD_FAILURE_EXIT_CODE (71), its status 3 in BUILD_EXIT_CODE_FILE"

	"$CTL_REAL" stop "$SANDBOX_NAME" >/dev/null 2>&1
	stage upload_artifacts_on_failure 'echo never'
	[ "$st" = 72 ] || fail "a stopped sandbox: status $st, not SYSTEM_FAILURE_EXIT_CODE 72: $(cat "$SANDBOX_HOME/upload_artifacts_on_failure.out")"
	echo "ok: a stage whose sandbox is gone exits SYSTEM_FAILURE_EXIT_CODE (72)"

	"$gl/cleanup.sh" || fail "cleanup: status $?"
	"$CTL_REAL" ls | grep -q "$SANDBOX_NAME" && fail "cleanup left the sandbox: $("$CTL_REAL" ls)"
	CUSTOM_ENV_CI_JOB_IMAGE=no-such-image "$gl/prepare.sh" >"$SANDBOX_HOME/prepare.out" 2>&1
	st=$?
	[ "$st" = 72 ] && grep -q "image 'no-such-image' is not installed" "$SANDBOX_HOME/prepare.out" ||
		fail "prepare of a missing image: status $st: $(cat "$SANDBOX_HOME/prepare.out")"
	"$gl/cleanup.sh" || fail "cleanup after a failed prepare: status $?"
	echo "ok: cleanup removes the sandbox; a missing image is a system failure (72)"
	echo "gitlab-executor: all ok"
	exit 0
}

if [ "${1-}" = --inner ]; then
	shift
	inner "$@"
fi
gl=$(cd "$here/../../tools/ci/gitlab" && pwd)
SANDBOX_GUEST_DEVHOST="--add $gl -e GITLAB_EXECUTOR=$gl"
GITLAB_EXECUTOR=$gl
export SANDBOX_GUEST_DEVHOST GITLAB_EXECUTOR
exec "$here/sandbox_guest.sh" "$here/gitlab_executor.sh" "$@"
