#!/bin/sh
# sandboxd's snapshots from Docker images, natively (no guest boots for a pull; issue 30, "A
# registry"): Debian's docker-registry on loopback with token auth, an image pushed by skopeo
# (registry_lib.sh), then through the API with a workspace's registry credentials:
#   - a snapshot from the image becomes ready and its image holds the pushed files (debugfs);
#   - a wrong password: the snapshot fails with ImagePull, saying so;
#   - a layer whose digest does not match (registry_fake.py liar): fails naming the digest;
#   - a registry that never answers: fails within the stall bound, while another tenant's
#     calls are answered within 1 s throughout;
#   - another workspace sees none of it (404), and a tenant cannot reach this host's loopback
#     registries unless the operator allows it;
#   - the password's bytes are nowhere in $SANDBOX_HOME.
# A box booted from such a snapshot is service_guest.sh's (it needs a guest).
#
# usage: service_registry.sh SANDBOXD SANDBOXCTL
set -u
here=$(cd "$(dirname "$0")" && pwd)
sandboxd=$1 ctl=$2
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
export SANDBOX_HOME
mkdir -p "$SANDBOX_HOME" "$work/tok" "$work/store"
fail_show "$work/registry.log" "$work/fake.log" "$work/sd.err"
USER_NAME=alice
PASSWORD="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')-Zq"
echo kernel >"$work/kernel"
echo initrd >"$work/initrd"
: >"$work/rootfs"
"$ctl" images import busybox --kernel "$work/kernel" --initrd "$work/initrd" \
	--rootfs "$work/rootfs" >/dev/null || fail "images import (the stand-in kernel's image)"
bb=/bin/busybox
[ -x "$bb" ] || bb=
python3 "$here/oci_make.py" "$work/arch" $bb >/dev/null 2>&1 || fail "oci_make.py"
registry_up
echo "ok: the image pushed to docker-registry on $reg (token auth) by skopeo"
LIAR_BASIC="$USER_NAME:$PASSWORD" python3 "$here/registry_fake.py" "$work/liar.port" liar \
	"$work/arch/good-oci" >>"$work/fake.log" 2>&1 &
pids="$pids $!"
liar=127.0.0.1:$(wait_port "$work/liar.port")
python3 "$here/registry_fake.py" "$work/silent.port" silent >>"$work/fake.log" 2>&1 &
pids="$pids $!"
silent=127.0.0.1:$(wait_port "$work/silent.port")

key() { "$sandboxd" keys create "$1" | sed -n 's/^key=\([^ ]*\) .*/\1/p'; }
k1=$(key reg1) k2=$(key reg2)
[ -n "$k1" ] && [ -n "$k2" ] || fail "sandboxd keys create"
port=$(free_port) opport=$(free_port)
start_sd() {
	"$sandboxd" serve --listen "127.0.0.1:$port" --operator "127.0.0.1:$opport" \
		--default-image busybox --registry-stall 2 "$@" >"$work/sd.out" 2>>"$work/sd.err" &
	sdpid=$!
	pids="$pids $sdpid"
	i=0
	until grep -q listening "$work/sd.out" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -gt 100 ] && fail "sandboxd did not start"
		sleep 0.1
	done
}

# The checks, from Python: the API's calls and their timing.
check() {
	SD_PORT=$port K1=$k1 K2=$k2 REG=$reg LIAR=$liar SILENT=$silent USER_NAME=$USER_NAME \
		PASSWORD=$PASSWORD python3 - "$@" <<'EOF'
import http.client, json, os, sys, threading, time
port = int(os.environ["SD_PORT"])
B = "/api/v2/sandboxes"
def req(key, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = {"X-Api-Key": key}
    if body is not None:
        body = json.dumps(body).encode(); h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse(); d = r.read()
    return r.status, json.loads(d) if d else None
def wait_snap(key, sid, limit=60):
    t0 = time.time()
    while time.time() - t0 < limit:
        st, s = req(key, "GET", B + "/snapshots/" + sid)
        if s and s.get("status") != "building":
            return s, time.time() - t0
        time.sleep(0.2)
    return None, time.time() - t0
def fail(msg):
    print("FAIL: " + msg); sys.exit(1)
k1, k2 = os.environ["K1"], os.environ["K2"]
mode = sys.argv[1]
if mode == "loopback-refused":
    st, r = req(k1, "POST", B + "/snapshots", {"name": "lo", "docker_image": os.environ["REG"] + "/test/img:v1", "fs_capacity_bytes": 0})
    s, _ = wait_snap(k1, r["id"]) if st == 200 else (None, 0)
    if not s or s["status"] != "failed" or "loopback" not in (s["status_message"] or ""):
        fail(f"a loopback registry without the operator's leave: {st} {r} {s}")
    print("ok: a tenant's pull from this host's loopback is refused: " + s["status_message"])
    sys.exit(0)
st, r = req(k1, "POST", B + "/registries", {"name": "team", "url": os.environ["REG"], "username": os.environ["USER_NAME"], "password": os.environ["PASSWORD"]})
if st != 201: fail(f"registry create: {st} {r}")
if "password" in json.dumps(r): fail("the registry's answer holds the password")
st, r = req(k1, "POST", B + "/registries", {"name": "wrong", "url": os.environ["REG"], "username": os.environ["USER_NAME"], "password": "nope-" + os.environ["PASSWORD"][:4]})
req(k1, "POST", B + "/registries", {"name": "liar", "url": os.environ["LIAR"], "username": os.environ["USER_NAME"], "password": os.environ["PASSWORD"]})
t0 = time.time()
st, r = req(k1, "POST", B + "/snapshots", {"name": "img", "docker_image": os.environ["REG"] + "/test/img:v1", "fs_capacity_bytes": 0, "registry_id": "team"})
if st != 200 or r["status"] != "building": fail(f"snapshot create: {st} {r}")
s, dt = wait_snap(k1, r["id"])
if not s or s["status"] != "ready": fail(f"the snapshot from the image: {s}")
print(f"ok: a snapshot from {os.environ['REG']}/test/img:v1 ready in {dt*1000:.0f} ms")
st, lst = req(k2, "GET", B + "/snapshots")
st2, one = req(k2, "GET", B + "/snapshots/" + r["id"])
st3, regs = req(k2, "GET", B + "/registries")
if lst["snapshots"] or st2 != 404 or regs["items"] or r["id"] in json.dumps(one):
    fail(f"another workspace sees it: {lst} {st2} {one} {regs}")
print("ok: another workspace sees neither the snapshot nor the registry")
st, r = req(k1, "POST", B + "/snapshots", {"name": "bad", "docker_image": os.environ["REG"] + "/test/img:v1", "fs_capacity_bytes": 0, "registry_id": "wrong"})
s, _ = wait_snap(k1, r["id"])
if not s or s["status"] != "failed" or "ImagePull" not in s["status_message"] or "authentication" not in s["status_message"]:
    fail(f"a wrong password: {s}")
print("ok: a wrong password: " + s["status_message"])
st, r = req(k1, "POST", B + "/snapshots", {"name": "badlayer", "docker_image": os.environ["LIAR"] + "/badlayer:v1", "fs_capacity_bytes": 0, "registry_id": "liar"})
s, _ = wait_snap(k1, r["id"])
if not s or s["status"] != "failed" or "digest mismatch" not in s["status_message"]:
    fail(f"a layer off by one byte: {s}")
print("ok: a layer whose digest does not match: " + s["status_message"])
worst = [0.0]
stop = threading.Event()
def probe():
    while not stop.is_set():
        t = time.time(); st, _ = req(k2, "GET", B + "/boxes"); d = time.time() - t
        worst[0] = max(worst[0], d if st == 200 else 99)
        time.sleep(0.05)
th = threading.Thread(target=probe); th.start()
t0 = time.time()
st, r = req(k1, "POST", B + "/snapshots", {"name": "silent", "docker_image": os.environ["SILENT"] + "/x:v1", "fs_capacity_bytes": 0})
s, dt = wait_snap(k1, r["id"], 30)
stop.set(); th.join()
if not s or s["status"] != "failed" or dt > 10:
    fail(f"a registry that never answers: {s} after {dt:.1f} s")
if worst[0] > 1.0: fail(f"another tenant waited {worst[0]:.2f} s during the silent pull")
print(f"ok: a silent registry failed the snapshot in {dt*1000:.0f} ms ({s['status_message']}); another tenant's worst answer {worst[0]*1000:.0f} ms")
EOF
}

start_sd
check loopback-refused || fail "the loopback check"
kill "$sdpid"
wait "$sdpid" 2>/dev/null
start_sd --registry-allow-loopback
check main || fail "the registry checks"
img=$(ls -d "$SANDBOX_HOME"/images/api-img-* 2>/dev/null | head -1)
[ -n "$img" ] && [ "$(debugfs -R 'cat /etc/hostname' "$img/rootfs" 2>/dev/null)" = oci-test ] ||
	fail "the snapshot's image: no /etc/hostname oci-test in $img/rootfs"
echo "ok: the snapshot's image holds the pushed files"
grep -r -F -l -- "$PASSWORD" "$SANDBOX_HOME" && fail "the password is in the files above"
b64=$(printf '%s:%s' "$USER_NAME" "$PASSWORD" | base64 -w0)
grep -r -F -l -- "$b64" "$SANDBOX_HOME" && fail "the Basic credentials are in the files above"
grep -F -e "$PASSWORD" -e "$b64" "$work/sd.err" && fail "a credential in sandboxd's log"
echo "ok: the password is nowhere in \$SANDBOX_HOME or sandboxd's log"
echo "service_registry: all checks passed"
