#!/bin/sh
# What the GitLab Runner custom executor's stages share (docs/ci.md): sourced by config.sh,
# prepare.sh, run.sh and cleanup.sh, which the runner calls as its documented contract says:
# every job variable comes as CUSTOM_ENV_<NAME>, a stage fails the job with
# $BUILD_FAILURE_EXIT_CODE (the job's script failed) or $SYSTEM_FAILURE_EXIT_CODE (we did).
#
# Environment (the runner's): CUSTOM_ENV_CI_JOB_ID, CUSTOM_ENV_CI_JOB_TOKEN,
# CUSTOM_ENV_CI_SERVER_HOST, CUSTOM_ENV_CI_SERVER_PORT, CUSTOM_ENV_CI_JOB_IMAGE,
# CUSTOM_ENV_CI_CONCURRENT_ID, BUILD_FAILURE_EXIT_CODE, SYSTEM_FAILURE_EXIT_CODE,
# BUILD_EXIT_CODE_FILE, TMPDIR. Ours: SANDBOXCTL (the sandboxctl to use; default the one on
# PATH).
set -u

ctl=${SANDBOXCTL:-sandboxctl}

# The executor failed, not the job: the runner marks it a system failure (and may retry it).
system_failure() {
	echo "sandbox executor: $*" >&2
	exit "${SYSTEM_FAILURE_EXIT_CODE:-1}"
}

# The job's sandbox: one per job, named for it (valid: [A-Za-z0-9][A-Za-z0-9._-]*).
job_id=${CUSTOM_ENV_CI_JOB_ID:-}
case $job_id in
'' | *[!0-9]*) system_failure "CUSTOM_ENV_CI_JOB_ID '$job_id' is not a job id" ;;
esac
sandbox=gitlab-job-$job_id

# What stands for the job token in the guest: the proxy replaces the headers that carry it
# (prepare.sh's credential rules), so git and the API still authenticate.
token_placeholder=sandbox-proxy-adds-the-job-token
