#!/usr/bin/env python3
"""sandboxd on real guests, what only a daemon that can be killed shows (issue 30: "Idle and
crash", the Precisions' kill -9 during a create, two clients on one command, SIGTERM's 1001, a
revoked key's WebSocket). Run where Linux guests boot (tests/integration/service_guest.sh):
this script starts, kills and restarts sandboxd itself.

usage: service_checks.py STATE_HOME -- SANDBOXD_COMMAND...
Prints "ok NAME" or "FAIL NAME: why" per check; exits 1 if any failed.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wsclient  # noqa: E402

PORT, OPPORT = 8480, 8481
BASE = "/api/v2/sandboxes"
failures = []


def check(name, cond, why=""):
    if cond:
        print(f"ok {name}", flush=True)
    else:
        print(f"FAIL {name}: {why}", flush=True)
        failures.append(name)


class Daemon:
    def __init__(self, cmd, home):
        self.cmd, self.home, self.proc = cmd, home, None

    def admin(self, *args, stdin=None):
        r = subprocess.run(self.cmd + list(args), input=stdin, capture_output=True, text=True,
                           env=dict(os.environ, SANDBOX_HOME=self.home), timeout=60)
        if r.returncode:
            raise SystemExit(f"sandboxd {' '.join(args)}: {r.stderr}")
        return r.stdout

    def start(self, *extra):
        self.log = open(os.path.join(self.home, "sandboxd.log"), "a")
        self.proc = subprocess.Popen(
            self.cmd + ["serve", "--listen", f"127.0.0.1:{PORT}", "--operator",
                        f"127.0.0.1:{OPPORT}", "--default-image", "busybox",
                        "--registry-allow-loopback"] + list(extra),
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=dict(os.environ, SANDBOX_HOME=self.home))
        line = self.proc.stdout.readline()
        if "listening" not in line:
            raise SystemExit(f"sandboxd did not start: {line!r}")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def term(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def req(key, method, path, body=None, timeout=300):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"X-Api-Key": key}
    if body is not None:
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    d = r.read()
    try:
        return r.status, json.loads(d) if d else None
    except ValueError:
        return r.status, d


def run(key, box, command, timeout=60):
    return req(key, "POST", f"/dp/{box['id']}/execute", {"command": command, "timeout": timeout})


def ws_open(key, box, first):
    s = wsclient.connect("127.0.0.1", PORT, f"/dp/{box['id']}/execute/ws", key)
    wsclient.send(s, first)
    return s


class Reader:
    """The frames of one command as a client keeps them: offsets checked, text joined."""

    def __init__(self):
        self.out = {"stdout": "", "stderr": ""}
        self.off = {"stdout": 0, "stderr": 0}
        self.exit = None
        self.close = None
        self.errors = []

    def read(self, s, count=None, until_exit=True):
        n = 0
        while True:
            try:
                op, data = wsclient.recv(s)
            except (EOFError, OSError):
                self.close = "eof"
                return
            if op == 8:
                self.close = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005
                return
            if op != 1:
                continue
            f = json.loads(data)
            t = f.get("type")
            if t in ("stdout", "stderr"):
                if f["offset"] != self.off[t]:
                    self.errors.append(f"{t} offset {f['offset']} != {self.off[t]}")
                self.out[t] += f["data"]
                self.off[t] += len(f["data"].encode())
            elif t == "exit":
                self.exit = f["exit_code"]
            elif t == "error":
                self.errors.append(f"error frame {f}")
            n += 1
            if count and n >= count:
                return


def vmm_pids():
    out = subprocess.run(["sh", "-c", "ps -eo pid,args 2>/dev/null || ps"], capture_output=True,
                         text=True).stdout
    return [int(l.split()[0]) for l in out.splitlines() if "sandbox-vmm" in l and "ps " not in l]


def mem_available_kib():
    # written back and dropped, so that the page cache of what the suspend wrote (or anything
    # else's) does not count on either side
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    home = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    d = Daemon(cmd, home)
    key = re.search(r"key=(\S+)", d.admin("keys", "create", "svc1")).group(1)
    d.start()

    st, box = req(key, "POST", BASE + "/boxes", {"name": "c1", "wait_for_ready": True})
    if st != 200:
        raise SystemExit(f"create: {st} {box}")

    only = os.environ.get("SERVICE_ONLY", "")

    def want_section(name):
        return not only or name in only.split(",")

    if want_section("crash"):
        crash_checks(d, key, box)
    if want_section("clients"):
        client_checks(d, key, box)
    if want_section("create"):
        create_checks(d, key)
    if want_section("pywire"):
        python_wire_checks(key, box)
    if want_section("proxy"):
        proxy_checks(d, key, home)
    if want_section("image"):
        image_checks(key, home)
    if want_section("pool"):
        pool_checks(d, key, home)
    if want_section("idle"):
        idle_checks(d, key, box, home)
    req(key, "DELETE", BASE + "/boxes/c1")
    time.sleep(3)  # deletes are done by workers
    d.term()
    left = vmm_pids()
    check("no-vmm-left", not left, f"VMMs {left}")
    if failures:
        print("--- sandboxd's log, its end:")
        print("".join(open(os.path.join(home, "sandboxd.log")).readlines()[-60:]))
    print(f"{len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


def crash_checks(d, key, box):
    # -- kill -9 during a streaming command: reconnect gives the whole output and the exit
    lines = 40
    s = ws_open(key, box, {"type": "execute", "command_id": "stream1", "close_stdin": True,
                           "timeout_seconds": 120, "command":
                           f"i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo line$i; "
                           "sleep 0.1; done; echo done >&2; exit 9"})
    r = Reader()
    r.read(s, count=6)
    before = r.out["stdout"]
    _, u0 = req(key, "GET", BASE + "/usage")
    time.sleep(1.5)  # usage is written each second
    d.kill9()
    d.start()
    _, u1 = req(key, "GET", BASE + "/usage")
    check("crash-usage-kept", u0.get("sandbox_seconds", 0) > 0 and
          u1.get("sandbox_seconds", 0) >= u0["sandbox_seconds"] and
          u1.get("vcpu_seconds", 0) >= u0.get("vcpu_seconds", 0), f"before {u0}; after {u1}")
    st, lst = req(key, "GET", BASE + "/boxes")
    check("crash-list", st == 200 and [b["name"] for b in lst["sandboxes"]] == ["c1"],
          f"{st} {lst}")
    s = ws_open(key, box, {"type": "reconnect", "command_id": "stream1",
                           "stdout_offset": r.off["stdout"], "stderr_offset": r.off["stderr"]})
    r.read(s)
    want = "".join(f"line{i}\n" for i in range(1, lines + 1))
    check("crash-stream", r.out["stdout"] == want and r.out["stderr"] == "done\n" and
          r.exit == 9 and not r.errors and before,
          f"before the kill {before!r}; after: {r.out} exit {r.exit} {r.errors}")



def client_checks(d, key, box):
    # -- two clients attached to one command, each gets all of it
    first = {"type": "execute", "command_id": "two1", "close_stdin": True, "timeout_seconds": 60,
             "command": "sleep 1; for i in 1 2 3 4 5; do echo x$i; sleep 0.2; done"}
    a, b = Reader(), Reader()
    sa, sb = ws_open(key, box, first), ws_open(key, box, first)
    ta = threading.Thread(target=a.read, args=(sa,))
    tb = threading.Thread(target=b.read, args=(sb,))
    ta.start(); tb.start(); ta.join(60); tb.join(60)
    want = "".join(f"x{i}\n" for i in range(1, 6))
    st, cmds = req(key, "GET", BASE + "/boxes/c1/commands")
    procs = [c for c in (cmds or {}).get("commands", []) if c["command_id"] == "two1"]
    st, stats = req(key, "GET", BASE + "/boxes/c1/stats")
    check("box-stats", st == 200 and stats["memory_bytes"] > 0 and stats["cpu_usec"] > 0,
          f"{st} {stats}")
    check("two-clients", a.out["stdout"] == want and b.out["stdout"] == want and a.exit == 0 and
          b.exit == 0 and len(procs) == 1, f"{a.out} {b.out} {a.exit} {b.exit} {cmds}")

    # -- SIGTERM closes every WebSocket with 1001; the command goes on
    s = ws_open(key, box, {"type": "execute", "command_id": "term1", "close_stdin": True,
                           "timeout_seconds": 60, "command": "sleep 3; echo after"})
    r = Reader()
    r.read(s, count=1)  # started
    d.term()
    r.read(s)
    check("sigterm-1001", r.close == 1001, f"close {r.close}")
    d.start()
    s = ws_open(key, box, {"type": "reconnect", "command_id": "term1", "stdout_offset": 0,
                           "stderr_offset": 0})
    r = Reader()
    r.read(s)
    check("sigterm-command-goes-on", r.out["stdout"] == "after\n" and r.exit == 0,
          f"{r.out} {r.exit}")

    # -- a revoked key's open WebSocket closes within 1 s
    out = d.admin("keys", "create", "svc1")
    key2, kid = re.search(r"key=(\S+)", out).group(1), re.search(r"id=(\S+)", out).group(1)
    time.sleep(0.5)  # the daemon reads new keys on its tick
    s = ws_open(key2, box, {"type": "execute", "command_id": "rev1", "close_stdin": True,
                            "timeout_seconds": 60, "command": "sleep 30"})
    r = Reader()
    r.read(s, count=1)
    t0 = time.time()
    d.admin("keys", "revoke", kid)
    r.read(s)
    dt = time.time() - t0
    check("revoked-ws-closes", r.close is not None and dt < 1.0, f"close {r.close} after {dt:.2f}s")
    st, _ = req(key2, "GET", BASE + "/boxes")
    check("revoked-key-401", st == 401, f"{st}")



def python_wire_checks(key, box):
    # -- what the LangSmith Python client does differently on the wire (its package cannot be
    # installed here): the /v2/sandboxes base, header names in lower case, command ids of 32
    # hex digits, a ping answered, and kill followed at once by the socket's close
    import uuid
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.putrequest("GET", "/v2/sandboxes/boxes/" + box["name"], skip_accept_encoding=True)
    c.putheader("x-api-key", key)
    c.putheader("user-agent", "langsmith-py/0.4")
    c.endheaders()
    r = c.getresponse()
    got = json.loads(r.read())
    check("py-base-lowercase", r.status == 200 and got["id"] == box["id"], f"{r.status} {got}")
    cid = uuid.uuid4().hex
    s = ws_open(key, box, {"type": "execute", "command_id": cid, "command": "sleep 300",
                           "timeout_seconds": 0, "idle_timeout_seconds": -1,
                           "ttl_seconds": -1, "shell": "/bin/bash"})
    r = Reader()
    r.read(s, count=1)
    wsclient.send(s, b"ping-1", opcode=9)
    op, data = wsclient.recv(s)
    check("py-ping-pong", op == 10 and data == b"ping-1", f"op {op} {data!r}")
    wsclient.send(s, {"type": "kill"})
    s.close()
    time.sleep(2)
    st, cmds = req(key, "GET", BASE + "/boxes/c1/commands")
    mine = [x for x in (cmds or {}).get("commands", []) if x["command_id"] == cid]
    check("py-kill-then-close", len(mine) == 1 and not mine[0]["running"] and
          mine[0]["exit_code"] == 137, f"{cmds}")


def create_checks(d, key):
    # -- kill -9 during a create: no stray VMM; the name is free or ready
    vmms_before = set(vmm_pids())
    def cut_create():
        try:
            req(key, "POST", BASE + "/boxes", {"name": "cut1", "wait_for_ready": True}, timeout=30)
        except (OSError, http.client.HTTPException):
            pass  # the daemon was killed under it: what the check is about

    t = threading.Thread(target=cut_create)
    t.daemon = True
    t.start()
    time.sleep(1.0)
    d.kill9()
    time.sleep(2)
    d.start()
    time.sleep(1)
    st, got = req(key, "GET", BASE + "/boxes/cut1")
    _, lst = req(key, "GET", BASE + "/boxes")
    running = len([b for b in lst["sandboxes"] if b["status"] == "ready"])
    stray = set(vmm_pids()) - vmms_before
    if st == 200:
        ok = got["status"] == "ready" and len(vmm_pids()) == running
        req(key, "DELETE", BASE + "/boxes/cut1")
    else:
        st2, again = req(key, "POST", BASE + "/boxes", {"name": "cut1", "wait_for_ready": True})
        ok = st == 404 and st2 == 200 and not stray
        if st2 == 200:
            req(key, "DELETE", BASE + "/boxes/cut1")
    check("crash-create", ok, f"get {st} {got}; stray VMMs {stray}")



def proxy_checks(d, key, home):
    # -- proxy_config: a workspace secret becomes the box's proxy's credential for its host
    # (injected outside the VM: net-linux shows the proxy putting it on the wire), nowhere in
    # the guest nor in the policy the proxy shows; a host the allow list leaves out refused;
    # what we do not serve refused with 422
    import secrets
    secret = "s3cr3t-" + secrets.token_hex(12)
    d.admin("secrets", "set", "svc1", "GH_TOKEN", stdin=secret)
    pc = {"rules": [{"name": "gh", "type": "headers", "match_hosts": ["api.example.test"],
                     "headers": [{"name": "Authorization", "type": "workspace_secret",
                                  "value": "{GH_TOKEN}"}]}],
          "access_control": {"allow_list": ["api.example.test", "*.example.test"]}}
    st, px = req(key, "POST", BASE + "/boxes", {"name": "px", "proxy_config": pc,
                                                "wait_for_ready": True})
    if st != 200:
        check("proxy-create", False, f"{st} {px}")
        return
    sbid = json.load(open(os.path.join(home, "service", "boxes", px["id"] + ".json")))["sandbox"]
    sdir = os.path.join(home, "sandboxes", sbid)
    creds = open(os.path.join(sdir, "credentials"), errors="replace").read()
    policy = open(os.path.join(sdir, "policy.yaml"), errors="replace").read()
    check("proxy-secret-to-proxy", secret in creds and "api.example.test" in creds and
          secret not in policy and "api.example.test" in policy,
          f"credentials {creds[:200]!r}; policy {policy[:300]!r}")
    st, r = run(key, px, f"grep -r -l -s '{secret}' /etc /root /tmp /var /run /home "
                         f"/usr/local 2>/dev/null | wc -l; env | grep -c '{secret}'")
    check("proxy-secret-not-in-guest", st == 200 and r["stdout"].split() == ["0", "0"],
          f"{st} {r}")
    st, r = run(key, px, "wget -q -T 5 -O - http://10.9.9.9/ >/dev/null 2>&1; echo $?")
    check("proxy-denied-host", st == 200 and r["stdout"].strip() not in ("", "0"), f"{st} {r}")
    st, _ = req(key, "GET", BASE + "/boxes/px")
    check("proxy-config-not-returned", st == 200 and secret not in json.dumps(_), f"{_}")
    req(key, "DELETE", BASE + "/boxes/px")
    left = [f for f in os.listdir(os.path.join(home, "service", "tmp"))] if os.path.isdir(
        os.path.join(home, "service", "tmp")) else []
    check("proxy-no-secret-files-left", not left, f"{left}")
    st, r = req(key, "POST", BASE + "/boxes", {"name": "aws", "proxy_config": {"rules": [
        {"name": "s3", "type": "aws", "match_hosts": ["s3.amazonaws.com"],
         "aws": {"access_key_id": {"type": "opaque", "value": "x"},
                 "secret_access_key": {"type": "opaque", "value": "y"}}}]}})
    check("proxy-aws-422", st == 422 and "aws" in json.dumps(r), f"{st} {r}")
    st, r = req(key, "POST", BASE + "/boxes", {"name": "lo", "proxy_config": {
        "access_control": {"allow_list": ["127.0.0.1/32"]}}})
    check("proxy-loopback-422", st == 422, f"{st} {r}")


def pool_ready():
    c = http.client.HTTPConnection("127.0.0.1", OPPORT, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    m = re.search(r'^sandboxd_pool_ready\{image="busybox",vcpus="1",memory_mib="512"\} (\d+)$',
                  body, re.M)
    claims = re.search(r"^sandboxd_claim_duration_seconds_count(?:\{\})? (\d+)$", body, re.M)
    return (int(m.group(1)) if m else -1), (int(claims.group(1)) if claims else -1)


def wait_pool(want, seconds=180):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        n, _ = pool_ready()
        if n >= want:
            return True
        time.sleep(0.5)
    return False


def pool_checks(d, key, home):
    # -- a warm pool (sandboxd --pool): filled at start; a create of that image and size
    # claims its sandbox with the create's proxy_config applied before the answer; the claimed
    # box runs commands at once; the pool refills; a restart without the pool removes its
    # sandbox (no VMM left but the boxes')
    d.term()
    d.start("--pool", "busybox:1:512=1")
    check("pool-filled", wait_pool(1), f"pool_ready {pool_ready()}")
    _, claims = pool_ready()
    pc = {"access_control": {"allow_list": ["api.example.test"]}}
    t0 = time.monotonic()
    st, pl = req(key, "POST", BASE + "/boxes", {"name": "pl1", "proxy_config": pc,
                                                "wait_for_ready": True})
    ms = (time.monotonic() - t0) * 1000
    if st != 200:
        check("pool-claim", False, f"{st} {pl}")
        return
    n, claims2 = pool_ready()
    check("pool-claim", claims2 == claims + 1, f"claims {claims} -> {claims2}; {ms:.0f} ms")
    print(f"pool: create from the pool answered in {ms:.0f} ms", flush=True)
    st, r = run(key, pl, "echo $((6*7))")
    check("pool-claimed-runs", st == 200 and r["stdout"] == "42\n", f"{st} {r}")
    sbid = json.load(open(os.path.join(home, "service", "boxes", pl["id"] + ".json")))["sandbox"]
    policy = open(os.path.join(home, "sandboxes", sbid, "policy.yaml"), errors="replace").read()
    st, r = run(key, pl, "wget -q -T 5 -O - http://10.9.9.9/ >/dev/null 2>&1; echo $?")
    check("pool-claim-policy", "api.example.test" in policy and st == 200 and
          r["stdout"].strip() not in ("", "0"), f"{st} {r}; policy {policy[:300]!r}")
    check("pool-refilled", wait_pool(1), f"pool_ready {pool_ready()}")
    req(key, "DELETE", BASE + "/boxes/pl1")
    time.sleep(3)
    d.term()
    d.start()
    time.sleep(2)
    _, lst = req(key, "GET", BASE + "/boxes")
    running = len([b for b in lst["sandboxes"] if b["status"] == "ready"])
    check("pool-cleaned-at-start", len(vmm_pids()) == running,
          f"VMMs {vmm_pids()}, ready boxes {running}")


def image_checks(key, home):
    # -- a snapshot from an image pulled from a registry (registry_fake.py's honest Basic-auth
    # registry of oci_make.py's image, on this host's loopback), then a box made from it
    # running the image's command: as the image's user, in its working directory
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "integration")
    work = os.path.join(home, "image-test")
    os.makedirs(work, exist_ok=True)
    bb = ["/bin/busybox"] if os.path.exists("/bin/busybox") else []
    subprocess.run([sys.executable, os.path.join(here, "oci_make.py"), work + "/arch"] + bb,
                   check=True, capture_output=True)
    portfile = work + "/port"
    fake = subprocess.Popen([sys.executable, os.path.join(here, "registry_fake.py"), portfile,
                             "liar", work + "/arch/good-oci"],
                            env=dict(os.environ, LIAR_BASIC="bob:pw-image-test"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(portfile) and open(portfile).read().strip():
                break
            time.sleep(0.1)
        reg = "127.0.0.1:" + open(portfile).read().strip()
        req(key, "POST", BASE + "/registries", {"name": "fake", "url": reg, "username": "bob",
                                                "password": "pw-image-test"})
        st, snap = req(key, "POST", BASE + "/snapshots", {
            "name": "from-image", "docker_image": reg + "/basic:v1", "fs_capacity_bytes": 0,
            "registry_id": "fake"})
        t0 = time.time()
        while st == 200 and snap["status"] == "building" and time.time() - t0 < 120:
            time.sleep(0.5)
            st, snap = req(key, "GET", BASE + "/snapshots/" + snap["id"])
        check("image-snapshot", st == 200 and snap["status"] == "ready", f"{st} {snap}")
        st, ib = req(key, "POST", BASE + "/boxes", {"name": "img1", "snapshot_name": "from-image",
                                                    "wait_for_ready": True})
        if st != 200:
            check("image-box", False, f"{st} {ib}")
            return
        st, r = run(key, ib, "echo entrypoint ran as $(id -u) in $(pwd); cat /etc/hostname")
        check("image-box-runs-its-command", st == 200 and r["exit_code"] == 0 and
              r["stdout"].endswith(" in /app/work\noci-test\n") and
              "ran as 0 " not in r["stdout"], f"{st} {r}")
        req(key, "DELETE", BASE + "/boxes/img1")
    finally:
        fake.kill()


def idle_checks(d, key, box, home):
    # -- idle: stopped past its idle_ttl, memory given back, the next run wakes it
    st, _ = req(key, "PATCH", BASE + "/boxes/c1", {"idle_ttl_seconds": 60})
    st, r = run(key, box, "echo kept > /root/idle.txt; setsid sh -c 'sleep 100000' </dev/null "
                          ">/dev/null 2>&1 & sync; echo started")
    check("idle-setup", st == 200 and r["stdout"] == "started\n", f"{st} {r}")
    sbid = json.load(open(os.path.join(home, "service", "boxes", box["id"] + ".json")))["sandbox"]
    pidfile = os.path.join(home, "sandboxes", sbid, "pid")
    vmm = int(open(pidfile).read().split()[0])
    rss = rss_kib(vmm)
    avail0 = mem_available_kib()
    t0 = time.time()
    status = None
    while time.time() - t0 < 150:
        _, s_ = req(key, "GET", BASE + "/boxes/c1/status")
        status = s_["status"]
        if status == "stopped":
            break
        time.sleep(1)
    idle_s = time.time() - t0
    gone = not os.path.exists(f"/proc/{vmm}")  # reaped: sandboxd started it, its child
    avail1 = mem_available_kib()
    cg = ""
    try:
        cg = open(os.path.join(home, "sandboxes", sbid, "cgroup")).read().strip()
        cgmem = int(open(os.path.join(cg, "memory.current")).read())
    except (OSError, ValueError):
        cgmem = 0
    gained = avail1 - avail0
    print(f"idle: stopped after {idle_s:.0f}s; VMM RSS before {rss} KiB, MemAvailable +{gained} "
          f"KiB, cgroup memory after {cgmem} bytes", flush=True)
    check("idle-stopped", status == "stopped" and gone, f"status {status}, VMM gone {gone}")
    check("idle-memory", rss > 0 and gained >= 0.8 * rss and cgmem < (4 << 20),
          f"RSS {rss} KiB, MemAvailable +{gained} KiB, cgroup {cgmem}")
    t0 = time.time()
    st, res = run(key, box, "cat /root/idle.txt; ps | grep -c '[s]leep 100000'")
    wake_ms = (time.time() - t0) * 1000
    print(f"idle: wake to the first answered run {wake_ms:.0f} ms", flush=True)
    check("idle-wake", st == 200 and res["stdout"].split() == ["kept", "1"], f"{st} {res}")


if __name__ == "__main__":
    main()
