#!/bin/sh
# GitLab Runner custom executor, config stage (config_exec): the job's settings as JSON on
# stdout, with the job's sandbox name (random) in job_env for the later stages.
# usage: config.sh [--shell bash|sh]   (sh for images without bash, as busybox)
here=$(cd "$(dirname "$0")" && pwd)
SANDBOX_STAGE=config
. "$here/base.sh"
sandbox=gitlab-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')

shell=bash
if [ "${1-}" = --shell ]; then
	case ${2-} in bash | sh) shell=$2 ;; *) system_failure "config.sh: --shell bash or sh" ;; esac
fi
version=$("$ctl" --version 2>/dev/null | head -1 | sed 's/[^A-Za-z0-9 ._+-]//g')
[ -n "$version" ] || system_failure "cannot run $ctl --version"
cat <<JSON
{
  "builds_dir": "/builds",
  "cache_dir": "/cache",
  "builds_dir_is_shared": false,
  "hostname": "$sandbox",
  "shell": "$shell",
  "driver": {"name": "sandbox microVM", "version": "$version"},
  "job_env": {"SANDBOX_NAME": "$sandbox"}
}
JSON
