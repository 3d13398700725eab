#!/bin/sh
# GitLab Runner custom executor, prepare stage (prepare_exec): a fresh sandbox for the job.
#
# usage: prepare.sh [sandboxctl create options...]
# The options come from the runner's config.toml (prepare_args), the runner's administrator's
# choice, not the job's: the network policy (--policy FILE, --allow, --deny-all, ...), --cpus,
# --memory, --image. The job picks its image with `image:` (CUSTOM_ENV_CI_JOB_IMAGE) when that
# names an installed sandbox image (sandboxctl images), else the options' (default debian).
#
# The job token: the GitLab host is allowed, and the proxy adds the token to every request to
# it, as Authorization (Basic gitlab-ci-token:TOKEN, what git sends) and JOB-TOKEN (the API's),
# replacing what the guest sent; run.sh puts a placeholder where the token was in each script.
# An image that does not exist, or a create that fails: a system failure.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/base.sh"

image=
case ${CUSTOM_ENV_CI_JOB_IMAGE:-} in
'') ;;
*[!A-Za-z0-9._-]* | [!A-Za-z0-9]*)
	echo "sandbox executor: image '${CUSTOM_ENV_CI_JOB_IMAGE}' is not a sandbox image name: the runner's default" >&2 ;;
*)
	if "$ctl" images 2>/dev/null | awk 'NR > 1 { print $1 }' | grep -qx "$CUSTOM_ENV_CI_JOB_IMAGE"; then
		image=$CUSTOM_ENV_CI_JOB_IMAGE
	else
		system_failure "image '$CUSTOM_ENV_CI_JOB_IMAGE' is not installed here (sandboxctl images)"
	fi ;;
esac

set -- "$@" --name "$sandbox"
[ -z "$image" ] || set -- "$@" --image "$image"
none=
for a in "$@"; do [ "$a" = none ] && none=1; done
host=${CUSTOM_ENV_CI_SERVER_HOST:-}
token=${CUSTOM_ENV_CI_JOB_TOKEN:-}
if [ -z "$none" ] && [ -n "$host" ] && [ -n "$token" ]; then
	case $host in *[!A-Za-z0-9.-]*) system_failure "CI_SERVER_HOST '$host' is not a host name" ;; esac
	SANDBOX_GITLAB_BASIC="Basic $(printf 'gitlab-ci-token:%s' "$token" | base64 | tr -d '\n')"
	SANDBOX_GITLAB_TOKEN=$token
	export SANDBOX_GITLAB_BASIC SANDBOX_GITLAB_TOKEN
	set -- "$@" --allow "$host" \
		--credential "$host:Authorization=SANDBOX_GITLAB_BASIC" \
		--credential "$host:JOB-TOKEN=SANDBOX_GITLAB_TOKEN"
	port=${CUSTOM_ENV_CI_SERVER_PORT:-443}
	case $port in 80 | 443) ;; *[!0-9]* | '') ;; *) set -- "$@" --allow-port "$port" ;; esac
fi
echo "sandbox executor: creating $sandbox (${image:-the default image})"
"$ctl" rm -f "$sandbox" >/dev/null 2>&1 # a leftover of a job that was cut short
"$ctl" create "$@" >/dev/null || system_failure "sandboxctl create failed (status $?)"
"$ctl" exec "$sandbox" -- mkdir -p /builds /cache || system_failure "cannot make /builds in $sandbox"
