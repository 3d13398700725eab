#!/bin/sh
# sandboxctl images pull, natively (no guest; docs/images.md "Pulling from a registry"):
# Debian's docker-registry on 127.0.0.1 with token auth (a token server of ours,
# registry_fake.py, signing with a key made here), an image pushed to it by skopeo from an OCI
# layout oci_make.py builds, then:
#   - pulled and imported with the right password: the image's files are in its rootfs
#     (debugfs), exec.conf is the image's;
#   - a wrong password and no password: refused, saying so (authentication failed / wants
#     credentials), nothing installed;
#   - a lying registry (registry_fake.py liar): a manifest asked by digest that is other bytes,
#     a layer one byte off, a tag's false Docker-Content-Digest: each refused naming the
#     digest; a redirect of the blobs to another origin: pulled, and that origin saw no
#     Authorization; Basic auth: pulled with the password, refused without;
#   - a registry that accepts the connection and never answers: refused within the bound, both
#     the whole pull's (--timeout 3) and the stall bound (sandbox-pull --stall 2), timed;
#   - afterwards no byte string of the password is anywhere in $SANDBOX_HOME (grep -r), and no
#     staging directory is left.
#
# usage: oci_pull.sh SANDBOXCTL SANDBOX_PULL
# Exit: 0 pass, 1 fail, 77 skipped (no docker-registry, skopeo, openssl or debugfs).
set -u
here=$(cd "$(dirname "$0")" && pwd)
ctl=$1
pull=$2
. "$here/check_lib.sh"
. "$here/registry_lib.sh"

for p in docker-registry skopeo openssl debugfs python3; do
	command -v "$p" >/dev/null || {
		echo "SKIP: no $p (tools/dev setup installs docker-registry and skopeo)"
		exit 77
	}
done
work=$(mktemp -d)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
SANDBOX_HOME=$work/home
SANDBOX_PULL=$pull
export SANDBOX_HOME SANDBOX_PULL
mkdir -p "$SANDBOX_HOME" "$work/tok" "$work/store"
fail_show "$work/registry.log" "$work/fake.log"
USER_NAME=alice
# a password whose bytes are looked for afterwards: nothing else holds this string
PASSWORD="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')-Zq"
echo kernel >"$work/kernel"
echo initrd >"$work/initrd"

# ctl_pull ARGS...: sandboxctl images pull ARGS with the stand-in kernel and initrd
ctl_pull() {
	"$ctl" images pull "$@" --kernel "$work/kernel" --initrd "$work/initrd"
}

bb=/bin/busybox
[ -x "$bb" ] || bb=
python3 "$here/oci_make.py" "$work/arch" $bb >/dev/null 2>&1 || fail "oci_make.py"

registry_up
echo "ok: the image pushed to docker-registry on $reg (token auth) by skopeo"

# the right password: pulled, imported, its files there
t0=$(date +%s%N)
printf '%s\n' "$PASSWORD" | ctl_pull img "$reg/test/img:v1" --user "$USER_NAME" \
	--password-stdin >"$work/out" 2>&1 || fail "pull: $(cat "$work/out")"
ms=$((($(date +%s%N) - t0) / 1000000))
fs=$SANDBOX_HOME/images/img/rootfs
[ "$(debugfs -R 'cat /etc/hostname' "$fs" 2>/dev/null)" = oci-test ] ||
	fail "pulled image: no /etc/hostname oci-test in its rootfs"
debugfs -R 'stat /app/suid' "$fs" 2>/dev/null | grep -q 'Mode:  04755' || fail "pulled image: /app/suid"
grep -q '^workdir /app/work$' "$SANDBOX_HOME/images/img/exec.conf" || fail "pulled image: exec.conf"
grep -q "from $reg/test/img:v1" "$work/out" || fail "pull: no installed line: $(cat "$work/out")"
grep -q ' Basic ' "$work/tok/token.log" ||
	fail "the token server saw no credentials"
echo "ok: pulled with token auth and imported in $ms ms: /etc/hostname, /app/suid 04755, exec.conf"

# refused ARGS... -- MESSAGE: `images pull bad ARGS` fails (1) saying MESSAGE, installs nothing
refused() {
	msg=$1
	shift
	ctl_pull bad "$@" >"$work/out" 2>&1
	st=$?
	[ "$st" = 1 ] || fail "pull $*: status $st, $(cat "$work/out")"
	cat "$work/out" >>"$work/all-out"
	grep -q -- "$msg" "$work/out" || fail "pull $*: not '$msg': $(cat "$work/out")"
	[ -e "$SANDBOX_HOME/images/bad" ] && fail "pull $*: an image was installed"
	echo "ok: refused: $(tail -n 1 "$work/out")"
}

printf 'wrong-%s\n' "$PASSWORD" | ctl_pull bad "$reg/test/img:v1" --user "$USER_NAME" \
	--password-stdin >"$work/out" 2>&1
st=$?
cat "$work/out" >>"$work/all-out"
if [ "$st" != 1 ] || ! grep -q 'authentication failed: the token server refused' "$work/out"; then
	fail "a wrong password: status $st, $(cat "$work/out")"
fi
[ -e "$SANDBOX_HOME/images/bad" ] && fail "a wrong password: an image was installed"
echo "ok: a wrong password refused: $(tail -n 1 "$work/out")"
refused 'the registry wants credentials' "$reg/test/img:v1"
refused 'not found (HTTP 404 (MANIFEST_UNKNOWN))' "$reg/test/img:nosuchtag" --user "$USER_NAME" \
	--password-stdin <<EOF
$PASSWORD
EOF

# the liar
LIAR_BASIC="$USER_NAME:$PASSWORD" python3 "$here/registry_fake.py" "$work/liar.port" liar \
	"$work/arch/good-oci" >>"$work/fake.log" 2>&1 &
pids="$pids $!"
liar=127.0.0.1:$(wait_port "$work/liar.port")
mdig=$(python3 -c "import json, sys; print([m for m in json.load(open(sys.argv[1]))['manifests'] if m['platform']['architecture'] == 'amd64'][0]['digest'])" "$work/arch/good-oci/index.json")
refused "the manifest $mdig: digest mismatch" "$liar/lie@$mdig"
refused "layer 3 of 3 (sha256:.*): digest mismatch: sha256:[0-9a-f]* expected, sha256:" "$liar/badlayer:v1"
refused "digest mismatch: the registry says sha256:0000000000000000000000000000000000000000000000000000000000000000" "$liar/dcd:v1"
rm -f "$work/arch/store.log"
printf '%s\n' "$PASSWORD" | ctl_pull redir "$liar/redir:v1" --user "$USER_NAME" \
	--password-stdin >"$work/out" 2>&1 || fail "a pull through a redirect: $(cat "$work/out")"
cat "$work/out" >>"$work/all-out"
grep -q '^/v2/redir/blobs/.* Basic ' "$work/arch/liar.log" ||
	fail "the registry itself got no credentials: $(cat "$work/arch/liar.log")"
[ -s "$work/arch/store.log" ] || fail "the blobs were not fetched from the redirect's origin"
grep -q ' .' "$work/arch/store.log" && fail "the blob store got an Authorization: $(cat "$work/arch/store.log")"
echo "ok: blobs redirected to another origin: pulled, no Authorization sent there"
refused "the registry wants credentials (Basic)" "$liar/basic:v1"
printf '%s\n' "$PASSWORD" | ctl_pull basic "$liar/basic:v1" --user "$USER_NAME" \
	--password-stdin >"$work/out" 2>&1 || fail "a pull with Basic auth: $(cat "$work/out")"
echo "ok: Basic auth: pulled with the password"
refused "http:// to 10.0.0.1, which is not on loopback" "http://10.0.0.1/x:v1"

# a registry that never answers: the whole pull's bound, then the stall bound
python3 "$here/registry_fake.py" "$work/silent.port" silent >>"$work/fake.log" 2>&1 &
pids="$pids $!"
silent=127.0.0.1:$(wait_port "$work/silent.port")
t0=$(date +%s%N)
refused "the pull's deadline passed\|stopped answering" "$silent/x:v1" --timeout 3
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 6000 ] || fail "a silent registry held the pull $ms ms (its --timeout is 3 s)"
echo "ok: a silent registry refused in $ms ms (--timeout 3)"
t0=$(date +%s%N)
"$pull" "$silent/x:v1" "$work/silent-layout" --stall 2 >"$work/out" 2>&1 && fail "silent: pulled"
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q 'stopped answering' "$work/out" || fail "silent, --stall 2: $(cat "$work/out")"
[ "$ms" -lt 5000 ] || fail "a silent registry held sandbox-pull $ms ms (--stall 2)"
echo "ok: a silent registry refused by the stall bound in $ms ms (--stall 2)"

# the password's bytes: nowhere in the state directory, nor in any message printed (the token
# server and the liar echo the Authorization they got in their error answers)
grep -r -F -l -- "$PASSWORD" "$SANDBOX_HOME" && fail "the password is in the files above"
b64=$(printf '%s:%s' "$USER_NAME" "$PASSWORD" | base64 -w0)
grep -r -F -l -- "$b64" "$SANDBOX_HOME" && fail "the Basic credentials are in the files above"
grep -F -e "$PASSWORD" -e "$b64" -e Bearer "$work/all-out" && fail "a credential in a message above"
grep -q "$b64" "$work/tok/token.log" || fail "the token server saw no Basic credentials"
for f in "$SANDBOX_HOME"/images/.*; do
	case "$f" in */. | */..) ;; *) [ -e "$f" ] && fail "left $f" ;; esac
done
echo "ok: the password is nowhere in \$SANDBOX_HOME; no staging directory left"
echo "oci_pull: all checks passed"
