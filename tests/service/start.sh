#!/bin/sh
# Starts sandboxd for clients: its keys and quotas, `sandboxd serve`, then one line on stdout
# once it listens:
#   service-ready url=URL operator=URL key.WORKSPACE=KEY ...
# Where it runs, natively or in the emulated host (L1), is its caller's business
# (tests/integration/service_node.sh, tools/dev serve); in L1 the caller forwards this host's
# loopback to the port sandboxd listens on.
#
# usage: start.sh SANDBOXD [--fresh IMAGES] [--workspace NAME[,QUOTA=N...]]... [--revoke]
#                 [--stop-on HOST:PORT] [--deadline SEC] -- SERVE-OPTION...
#   --fresh IMAGES   a new $SANDBOX_HOME (removed at exit) whose images/ is IMAGES; without it,
#                    $SANDBOX_HOME (default /var/lib/sandbox) as it is
#   --workspace      a key for NAME (`sandboxd keys create`), and its quota if QUOTAs follow
#                    (`sandboxd quota set NAME sandboxes=1 ...`)
#   --revoke         first revoke every existing key of those workspaces (tools/dev serve: one
#                    live key for "dev", the last one printed)
#   --stop-on        after the ready line, wait for one connection on HOST:PORT, then stop
#                    sandboxd (SIGTERM) and exit; without it, wait for sandboxd to exit
#   --deadline SEC   stop anyway after SEC seconds (default 3600)
# Exit status: 0 when sandboxd ran and stopped on SIGTERM within 30 s leaving no VMM of its
# sandboxes, else 1 (with the end of its log on stderr).
set -u
sandboxd=$1
shift
fresh="" workspaces="" revoke=0 stop_on="" deadline=3600
while [ $# -gt 0 ]; do
	case $1 in
	--fresh) fresh=$2; shift 2 ;;
	--workspace) workspaces="$workspaces $2"; shift 2 ;;
	--revoke) revoke=1; shift ;;
	--stop-on) stop_on=$2; shift 2 ;;
	--deadline) deadline=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "start.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
say() { echo "service: $*" >&2; }
[ -x "$sandboxd" ] || { say "no sandboxd at $sandboxd (is it built?)"; exit 1; }

work=$(mktemp -d)
log=$work/sandboxd.log
pid=""
# (interrupted: sandboxd gets SIGTERM and 10 s, as a service manager would give it)
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	[ -z "${waiter:-}" ] || kill "$waiter" 2>/dev/null
	if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$pid" 2>/dev/null
	fi
	[ -z "$fresh" ] || rm -rf "$SANDBOX_HOME"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -n "$fresh" ]; then
	SANDBOX_HOME=$(mktemp -d)
	ln -s "$fresh" "$SANDBOX_HOME/images"
	export SANDBOX_HOME
fi

keys=""
for w in $workspaces; do
	name=${w%%,*}
	if [ "$revoke" = 1 ]; then
		"$sandboxd" keys list | sed -n "s/^id=\([^ ]*\) workspace=$name .*/\1/p" | while read -r id; do
			"$sandboxd" keys revoke "$id" || exit 1
		done || { say "cannot revoke the keys of $name"; exit 1; }
	fi
	line=$("$sandboxd" keys create "$name") || { say "keys create $name failed"; exit 1; }
	key=$(printf '%s\n' "$line" | sed -n 's/^key=\([^ ]*\) id=.*/\1/p')
	[ -n "$key" ] || { say "keys create $name printed no key=... id=... line"; exit 1; }
	keys="$keys key.$name=$key"
	if [ "$w" != "$name" ]; then
		# shellcheck disable=SC2046 # the quotas are words
		"$sandboxd" quota set "$name" $(printf '%s' "${w#*,}" | tr , ' ') ||
			{ say "quota set $name failed"; exit 1; }
	fi
done

"$sandboxd" serve "$@" >"$log" 2>&1 &
pid=$!
# The ready line, within 60 s (bounded: a sandboxd that neither listens nor dies is a failure).
i=0 ready=""
while [ $i -lt 600 ]; do
	ready=$(sed -n 's/^sandboxd listening \(url=[^ ]* operator=[^ ]*\).*/\1/p' "$log" | head -1)
	[ -n "$ready" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
if [ -z "$ready" ]; then
	say "sandboxd did not say it listens; its log:"
	tail -n 40 "$log" >&2
	exit 1
fi
echo "service-ready $ready$keys"

# Until the caller says stop (one connection), sandboxd exits, or the deadline (polled: no
# timer process outlives this script).
waiter=""
if [ -n "$stop_on" ]; then
	python3 - "$stop_on" "$deadline" <<'EOF' &
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, int(port)))
s.listen(1)
s.settimeout(float(sys.argv[2]))
try:
    c, _ = s.accept()
    c.close()
except socket.timeout:
    sys.exit(1)
EOF
	waiter=$!
fi
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt $((deadline * 5)) ]; do
	[ -z "$waiter" ] || kill -0 "$waiter" 2>/dev/null || break
	sleep 0.2
	i=$((i + 1))
done
[ -z "$waiter" ] || kill "$waiter" 2>/dev/null

rc=0
if kill -0 "$pid" 2>/dev/null; then
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 "$pid" 2>/dev/null; then
		say "sandboxd still runs 30 s after SIGTERM"
		rc=1
	else
		wait "$pid"
		st=$?
		[ "$st" = 0 ] || { say "sandboxd exited $st on SIGTERM"; rc=1; }
	fi
else
	wait "$pid"
	say "sandboxd exited by itself (status $?)"
	rc=1
fi
pid=""
# Sandboxes are not the daemon: they may outlive it (adopted at the next start). Here, with a
# fresh home, the test's scenario deleted every one; a VMM left is one a delete did not stop.
if [ -n "$fresh" ]; then
	# (a scan of /proc: the emulated host's busybox has no pgrep)
	left=""
	for f in /proc/[0-9]*/cmdline; do
		p=${f#/proc/} && p=${p%/cmdline}
		[ "$p" != "$$" ] || continue
		c=$(tr '\0' ' ' 2>/dev/null <"$f")
		case $c in *"$SANDBOX_HOME"*) left="$left $p: $(printf '%s' "$c" | cut -c1-120);" ;; esac
	done
	[ -z "$left" ] || { say "processes still name $SANDBOX_HOME:$left"; rc=1; }
fi
if [ "$rc" != 0 ] || [ -n "${SERVICE_LOG:-}" ]; then
	say "the end of sandboxd's log:"
	tail -n 60 "$log" >&2
fi
exit $rc
