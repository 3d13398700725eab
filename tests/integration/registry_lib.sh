#!/bin/sh
# Sourced by the registry tests (oci_pull.sh, service_registry.sh), after check_lib.sh, with
# $here (tests/integration), $work (the test's temp dir), $pids (kill at exit), USER_NAME and
# PASSWORD set: Debian's docker-registry on 127.0.0.1 with token auth (registry_fake.py's token
# server, signing with a key made here) and the test image of oci_make.py ($work/arch) pushed to
# it by skopeo as test/img:v1. registry_up sets reg (HOST:PORT) and tport.

# wait_port FILE: the port a server wrote, within 10 s
wait_port() {
	i=0
	while [ ! -s "$1" ]; do
		i=$((i + 1))
		[ "$i" -gt 100 ] && fail "no port in $1"
		sleep 0.1
	done
	cat "$1"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

registry_up() {
# the token server and the registry
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/tok/key.pem" -out "$work/tok/cert.pem" \
	-days 2 -subj /CN=test-token >/dev/null 2>&1 || fail "openssl req"
python3 "$here/registry_fake.py" "$work/tok.port" token "$work/tok" "$USER_NAME" "$PASSWORD" \
	>>"$work/fake.log" 2>&1 &
pids="$pids $!"
tport=$(wait_port "$work/tok.port")
rport=$(free_port)
cat >"$work/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/store
http:
  addr: 127.0.0.1:$rport
auth:
  token:
    realm: http://127.0.0.1:$tport/token
    service: test-registry
    issuer: test-issuer
    rootcertbundle: $work/tok/cert.pem
EOF
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
pids="$pids $!"
i=0
until python3 -c "import socket; socket.create_connection(('127.0.0.1', $rport), 1)" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -gt 100 ] && fail "docker-registry did not listen on $rport"
	sleep 0.1
done
reg=127.0.0.1:$rport
timeout 120 skopeo copy -q --dest-tls-verify=false --dest-creds "$USER_NAME:$PASSWORD" \
	"oci:$work/arch/good-oci:test:latest" "docker://$reg/test/img:v1" >"$work/skopeo.log" 2>&1 ||
	fail "skopeo copy: $(tail -5 "$work/skopeo.log")"
}
