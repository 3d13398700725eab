# SPDX-License-Identifier: Apache-2.0
# Sourced by the fleet's tests and its benchmark: start one of tests/fleet's services (a NATS
# cluster, Swift) for the length of the script.
#
#   start_service SECONDS PREFIX CMD...
#
# runs CMD as a coprocess whose stdin stays open (its end stops the service), waits up to
# SECONDS for its first line, which must begin with PREFIX, into $service_line, and at exit
# stops the service and removes $work when it is set.
start_service() {
	local secs=$1 prefix=$2
	shift 2
	coproc SERVICE { exec "$@" 2>&1; }
	trap stop_service EXIT
	if ! read -r -t "$secs" service_line <&"${SERVICE[0]}"; then
		echo "$0: ${1##*/} did not start in $secs s" >&2
		exit 1
	fi
	case $service_line in
	"$prefix"*) ;;
	*)
		echo "$0: ${1##*/}: $service_line" >&2
		exit 1
		;;
	esac
}

stop_service() {
	# (a service that already exited took its coprocess's fds with it)
	if [ -n "${SERVICE[1]-}" ]; then exec {SERVICE[1]}>&-; fi
	if [ -n "${SERVICE_PID-}" ]; then wait "$SERVICE_PID" 2>/dev/null || true; fi
	if [ -n "${work-}" ]; then rm -rf "$work"; fi
}
