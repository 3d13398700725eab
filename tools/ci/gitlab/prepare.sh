#!/bin/sh
# GitLab Runner custom executor, prepare stage (prepare_exec): a fresh sandbox for the job.
#
# usage: prepare.sh [--gitlab HOST[:PORT]] [sandboxctl create options...]
# The options come from the runner's config.toml (prepare_args), the runner's administrator's
# choice, not the job's: the GitLab host, the network policy (--policy FILE, --allow,
# --deny-all, ...), --cpus, --memory, --image. The job picks its image with `image:`
# (CUSTOM_ENV_CI_JOB_IMAGE) when that names an installed sandbox image (sandboxctl images),
# else the options' (default debian).
#
# The job token: the --gitlab host is allowed, and the proxy adds the token to every request
# to it, as Authorization (Basic gitlab-ci-token:TOKEN, what git sends) and JOB-TOKEN (the
# API's), replacing what the guest sent; run.sh puts a placeholder where the token was in each
# script. The host is the administrator's: a job may set CI_SERVER_HOST in its
# .gitlab-ci.yml, and one that differs from --gitlab is refused (the token would go there).
# Without --gitlab no token rule is made (the guest then has no token at all).
# An image that does not exist, or a create that fails: a system failure.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/base.sh"

gitlab=
if [ "${1-}" = --gitlab ]; then
	gitlab=${2-}
	shift 2 || system_failure "prepare.sh: --gitlab HOST[:PORT]"
fi
image=
case ${CUSTOM_ENV_CI_JOB_IMAGE:-} in
'') ;;
*[!A-Za-z0-9._-]* | [!A-Za-z0-9]*)
	echo "sandbox executor: image '${CUSTOM_ENV_CI_JOB_IMAGE}' is not a sandbox image name: the runner's default" >&2 ;;
*)
	if "$ctl" images 2>/dev/null | awk 'NR > 1 { print $1 }' | grep -qxF "$CUSTOM_ENV_CI_JOB_IMAGE"; then
		image=$CUSTOM_ENV_CI_JOB_IMAGE
	else
		system_failure "image '$CUSTOM_ENV_CI_JOB_IMAGE' is not installed here (sandboxctl images)"
	fi ;;
esac

set -- "$@" --name "$sandbox"
[ -z "$image" ] || set -- "$@" --image "$image"
none=
for a in "$@"; do [ "$a" = none ] && none=1; done
host=${gitlab%%:*}
port=443
case $gitlab in *:*) port=${gitlab##*:} ;; esac
token=${CUSTOM_ENV_CI_JOB_TOKEN:-}
if [ -n "$gitlab" ]; then
	case $host in '' | *[!A-Za-z0-9.-]*) system_failure "--gitlab '$gitlab' is not HOST[:PORT]" ;; esac
	case $port in '' | *[!0-9]*) system_failure "--gitlab '$gitlab' is not HOST[:PORT]" ;; esac
	[ "${CUSTOM_ENV_CI_SERVER_HOST:-$host}" = "$host" ] ||
		system_failure "the job says its GitLab is '${CUSTOM_ENV_CI_SERVER_HOST}', this runner's is '$host': refused (the job token goes only to the runner's)"
fi
if [ -z "$none" ] && [ -n "$gitlab" ] && [ -n "$token" ]; then
	SANDBOX_GITLAB_BASIC="Basic $(printf 'gitlab-ci-token:%s' "$token" | base64 | tr -d '\n')"
	SANDBOX_GITLAB_TOKEN=$token
	export SANDBOX_GITLAB_BASIC SANDBOX_GITLAB_TOKEN
	set -- "$@" --allow "$host" \
		--credential "$host:Authorization=SANDBOX_GITLAB_BASIC" \
		--credential "$host:JOB-TOKEN=SANDBOX_GITLAB_TOKEN"
	case $port in 80 | 443) ;; *) set -- "$@" --allow-port "$port" ;; esac
fi
echo "sandbox executor: creating $sandbox (${image:-the default image})"
"$ctl" rm -f "$sandbox" >/dev/null 2>&1 # a leftover of a job that was cut short
"$ctl" create "$@" >/dev/null || system_failure "sandboxctl create failed (status $?)"
"$ctl" exec "$sandbox" -- mkdir -p /builds /cache || system_failure "cannot make /builds in $sandbox"
