#!/bin/sh
# What the GitLab Runner custom executor's stages share (docs/ci.md): sourced by config.sh,
# prepare.sh, run.sh and cleanup.sh, which the runner calls as its documented contract says:
# every job variable comes as CUSTOM_ENV_<NAME>, a stage fails the job with
# $BUILD_FAILURE_EXIT_CODE (the job's script failed) or $SYSTEM_FAILURE_EXIT_CODE (we did).
#
# Environment (the runner's): CUSTOM_ENV_CI_JOB_TOKEN, CUSTOM_ENV_CI_SERVER_HOST,
# CUSTOM_ENV_CI_JOB_IMAGE, BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE,
# BUILD_EXIT_CODE_FILE, TMPDIR, and SANDBOX_NAME (config.sh's job_env). Ours: SANDBOXCTL (the
# sandboxctl to use; default the one on PATH). Every CUSTOM_ENV_* is the job's to set: none
# of them decides where the token goes or which sandbox a stage uses.
set -u

ctl=${SANDBOXCTL:-sandboxctl}

# The executor failed, not the job: the runner marks it a system failure (and may retry it).
system_failure() {
	echo "sandbox executor: $*" >&2
	exit "${SYSTEM_FAILURE_EXIT_CODE:-1}"
}

# The job's sandbox. Its name is not taken from a job variable (a job's .gitlab-ci.yml may
# set CI_JOB_ID to another running job's and so take over its sandbox): config.sh makes a
# random one and hands it to the later stages through the runner's job_env, as SANDBOX_NAME
# (the job's own variables all come prefixed, CUSTOM_ENV_*, so it cannot set this one).
sandbox=${SANDBOX_NAME:-}
if [ "${SANDBOX_STAGE:-}" != config ]; then
	case $sandbox in
	gitlab-[0-9a-f]*) case $sandbox in *[!0-9a-z-]*) system_failure "SANDBOX_NAME '$sandbox'" ;; esac ;;
	*) system_failure "no SANDBOX_NAME from the config stage (config_exec must be config.sh)" ;;
	esac
fi

# What stands for the job token in the guest: the proxy replaces the headers that carry it
# (prepare.sh's credential rules), so git and the API still authenticate.
token_placeholder=sandbox-proxy-adds-the-job-token
