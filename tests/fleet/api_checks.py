#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fleet's API on real guests (docs/fleet.md, "The service in a fleet"), in a topology this
script makes and removes: three hosts as network namespaces (fh1..fh3, 10.77.0.11-13 on a
bridge), each with its own state directory and `sandboxd serve --fleet`, and a three-node NATS
cluster with JetStream on the bridge's address. Run where Linux guests boot (api.sh routes it).

    api_checks.py --sandboxd CMD --images DIR --bin DIR

Checks (each says what it found):
  - a key made once with `keys create --fleet` works on every host;
  - 12 creates through the three hosts' APIs, two at a time: all ready, no host over its 4
    slots, and each sandbox answers an execute at its dataplane_url;
  - a 13th create waits, then gets the API's unschedulable error (503 Unschedulable);
  - every box is found by name through every host (a call for another host's box runs there),
    and a list through any host holds all 12;
  - a delete through a host that does not own the box frees its name and its slot: a create
    under the same name is ready again;
  - a rename through a host that does not own the box: found by the new name through every
    host, not by the old; a second box cannot take the name (409).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HOSTS = 3
SLOTS = 4
BRIDGE = "fbr0"
NET = "10.77.0"
NATS_PORT = 4300
API_PORT = 8380
MEM = 128 << 20
SWIFT_PORT = 4400
BUCKET = "sandboxes"
WORKSPACE = "team"  # the checks' (boxes_on reads the hosts' records of it)

failures = []
T0 = time.time()


def say(msg):
    print("fleet-api: [%4.0f s] %s" % (time.time() - T0, msg), flush=True)


def check(ok, what):
    say(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


def sh(*argv, check_rc=True):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check_rc and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), p.stdout.strip()))
    return p.stdout


def api(host, key, method, path, body=None, timeout=150):
    """(status, parsed JSON or text) of one call to host i's API."""
    url = "http://%s.%d:%d%s" % (NET, 10 + host, API_PORT, path)
    return call(url, key, method, body, timeout)


def call(url, key, method, body=None, timeout=150):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url, data=data, method=method,
                               headers={"X-Api-Key": key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


class Topology:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="fleet-api.")
        self.procs = []
        self.nats = None
        self.store = None
        self.swift_proc = None

    def up(self):
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", "%s.1/24" % NET, "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for i in range(1, HOSTS + 1):
            ns = "fh%d" % i
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", "fv%d" % i, "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            sh("ip", "link", "set", "fv%d" % i, "master", BRIDGE, "up")
            sh("ip", "-n", ns, "addr", "add", "%s.%d/24" % (NET, 10 + i), "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, PATH=self.a.bin + ":" + os.environ["PATH"])
        self.nats = subprocess.Popen(
            [sys.executable, os.path.join(here, "nats_cluster.py"), os.path.join(self.work, "nats"),
             "--nodes", "3", "--port", str(NATS_PORT), "--host", NET + ".1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        line = self.nats.stdout.readline().strip()
        if not line.startswith("nats servers="):
            raise RuntimeError("the NATS cluster did not start: %r" % line)
        self.servers = line.split()[1].split("=", 1)[1]
        self.nats_pids = line.split()[2].split("=", 1)[1].split(",")
        say("NATS: " + self.servers)

    def home(self, i):
        h = os.path.join(self.work, "h%d" % i)
        if not os.path.isdir(h):
            os.makedirs(h)
            os.symlink(self.a.images, os.path.join(h, "images"))
        return h

    def sandboxd(self, i, *args, ns=True):
        env = dict(os.environ, SANDBOX_HOME=self.home(i))
        argv = (["ip", "netns", "exec", "fh%d" % i] if ns else []) + self.a.sandboxd + list(args)
        return argv, env

    def key(self, workspace):
        argv, env = self.sandboxd(1, "keys", "create", workspace, "--fleet", self.servers,
                                  ns=False)
        out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
        return out.split()[0].split("=", 1)[1]

    def quota(self, workspace, *settings):
        """sandboxd quota set WORKSPACE SETTING... for the whole fleet."""
        argv, env = self.sandboxd(1, "quota", "set", workspace, *settings, "--fleet",
                                  self.servers, ns=False)
        subprocess.run(argv, env=env, check=True)

    def swift(self):
        """Swift with its S3 API on the bridge's address (its directory on a file system
        with user xattrs): the fleet's object store."""
        here = os.path.dirname(os.path.abspath(__file__))
        d = os.path.join(self.a.swift_dir, "swift")
        self.swift_proc = subprocess.Popen(
            [sys.executable, os.path.join(here, "swift_s3.py"), d, "--host", NET + ".1",
             "--port", str(SWIFT_PORT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        line = self.swift_proc.stdout.readline().strip()
        if not line.startswith("swift-s3 endpoint="):
            raise RuntimeError("Swift did not start: %r" % line)
        f = dict(w.split("=", 1) for w in line.split()[1:])
        self.store = f
        creds = os.path.join(self.work, "store.cred")
        with open(creds, "w") as c:
            c.write("%s\n%s\n" % (f["access"], f["secret"]))
        with open(os.path.join(self.work, "fleet.key"), "wb") as k:
            k.write(os.urandom(32))
        say("Swift: " + f["endpoint"])
        return f

    def serve(self, i, extra=()):
        addr = "%s.%d:%d" % (NET, 10 + i, API_PORT)
        store = []
        if self.store:
            store = ["--store-endpoint", self.store["endpoint"], "--store-bucket", BUCKET,
                     "--store-credentials", os.path.join(self.work, "store.cred"),
                     "--fleet-key", os.path.join(self.work, "fleet.key"), "--chunk-kib", "256"]
        argv, env = self.sandboxd(
            i, "serve", "--listen", addr, "--insecure-http", "--operator", "127.0.0.1:8381",
            "--default-image", "busybox", "--fleet", self.servers, "--host-id", "fh%d" % i,
            "--slots", str(SLOTS), "--fleet-replicas", "3", *store, *extra)
        log = open(os.path.join(self.work, "sandboxd-%d.log" % i), "w")
        p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def kill_host(self, i):
        """Host i's power lost: its sandboxd and every process of its state directory (the
        VMMs, the proxies: their command lines name it) killed -9 at once."""
        p = self.procs[i - 1]
        os.kill(p.pid, signal.SIGKILL)
        home = self.home(i).encode() + b"/"
        killed = 0
        for pid in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if home in f.read() and int(pid) != os.getpid():
                        os.kill(int(pid), signal.SIGKILL)
                        killed += 1
            except (OSError, ValueError):
                pass
        p.wait(timeout=10)
        return killed

    def kill_nats(self, node):
        pid = int(self.nats_pids[node])
        os.kill(pid, signal.SIGKILL)

    def log(self, i):
        path = os.path.join(self.work, "sandboxd-%d.log" % i)
        with open(path, errors="replace") as f:
            return f.read()

    def logs(self):
        for i in range(1, HOSTS + 1):
            path = os.path.join(self.work, "sandboxd-%d.log" % i)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    lines = f.read().splitlines()
                # a failed attempt's story: the fleet's and the boxes' lines (the rest, the
                # proxies' warnings, left out), the last 80
                tail = [ln for ln in lines if "box " in ln or "fleet" in ln
                        or "drain" in ln][-80:]
                say("sandboxd fh%d's log, its boxes and fleet:\n  " % i + "\n  ".join(tail))

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        for i in range(1, HOSTS + 1):  # the VMMs sandboxd leaves running (by design)
            sbs = os.path.join(self.home(i), "sandboxes")
            for s in os.listdir(sbs) if os.path.isdir(sbs) else []:
                subprocess.run(self.a.ctl + ["rm", "-f", s], env=dict(os.environ,
                               SANDBOX_HOME=self.home(i)), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            sh("ip", "netns", "del", "fh%d" % i, check_rc=False)
        for p in (self.nats, self.swift_proc):
            if p:
                p.stdin.close()
                p.wait(timeout=30)
        sh("ip", "link", "del", BRIDGE, check_rc=False)
        shutil.rmtree(self.work, ignore_errors=True)


def wait_up(key, hosts=None):
    deadline = time.time() + 60
    for i in hosts or range(1, HOSTS + 1):
        while True:
            try:
                st, _ = api(i, key, "GET", "/v2/sandboxes/boxes", timeout=5)
                if st == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("host fh%d's API did not answer with the fleet's key" % i)
            time.sleep(0.3)


def node_scenario(t):
    """The LangSmith JS client, unchanged (tests/service/scenario.mjs, the service issue's
    scenario), against the fleet through one host (fh2): its sandboxes placed on all three,
    their dataplanes through their owners. Workspaces node1, and node2 with a fleet-wide quota
    of one sandbox."""
    node, modules = os.environ.get("FLEET_NODE"), os.environ.get("FLEET_NODE_MODULES")
    if not node or not modules:
        check(False, "the Node scenario: no node or LangSmith client given (FLEET_NODE, "
              "FLEET_NODE_MODULES: tools/dev setup fetches them)")
        return
    k1, k2 = t.key("node1"), t.key("node2")
    argv, env = t.sandboxd(1, "quota", "set", "node2", "sandboxes=1", "--fleet", t.servers,
                           ns=False)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    wait_up(k1)
    wait_up(k2)
    here = os.path.dirname(os.path.abspath(__file__))
    scenario = os.path.join(here, "..", "service", "scenario.mjs")
    t0 = time.time()
    p = subprocess.run(
        [node, scenario], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=900, env=dict(os.environ, SANDBOXD_URL="http://%s.12:%d" % (NET, API_PORT),
                              SANDBOXD_KEY=k1, SANDBOXD_KEY2=k2, SCENARIO_CHECK_TIMEOUT_S="300",
                              SCENARIO_NODE_MODULES=modules))
    for k in (k1, k2):  # (what it left: the slots are the checks' after it)
        st, lst = api(1, k, "GET", "/v2/sandboxes/boxes")
        for b in lst.get("sandboxes", []) if st == 200 else []:
            api(1, k, "DELETE", "/v2/sandboxes/boxes/%s" % b["id"])
    lines = p.stdout.splitlines()
    oks = [ln for ln in lines if ln.startswith("ok ")]
    bad = [ln for ln in lines if ln.startswith("FAIL")]
    check(p.returncode == 0 and oks and not bad,
          "the LangSmith JS client's scenario through fh2: %d checks ok in %.0f s%s" % (
              len(oks), time.time() - t0,
              "" if p.returncode == 0 and not bad else
              " (exit %d): %s" % (p.returncode, "\n  ".join((bad or lines[-20:])[:40]))))


def creates(key):
    results = {}
    lock = threading.Semaphore(2)

    def one(n):
        with lock:
            t0 = time.time()
            results[n] = api(n % HOSTS + 1, key, "POST", "/v2/sandboxes/boxes",
                             {"name": "f%d" % n, "mem_bytes": MEM, "timeout": 240}) + (
                time.time() - t0,)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(HOSTS * SLOTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def owner_of(box):
    # dataplane_url names the owner: http://10.77.0.1X:PORT/dp/ID
    return box["dataplane_url"].split("//", 1)[1].split(":", 1)[0]


def run(box, key, command, via=None):
    """command run at the box's dataplane_url (or the same path on host via: every host
    serves every box's dataplane)."""
    url = box["dataplane_url"]
    if via:
        url = "http://%s.%d:%d/dp/%s" % (NET, 10 + via, API_PORT, box["id"])
    st, out = call(url + "/execute", key, "POST", {"command": command, "timeout": 60})
    return out.get("stdout", "") if st == 200 and isinstance(out, dict) else "(%s %s)" % (st, out)


def host_of(addr):
    return int(addr.rsplit(".", 1)[1]) - 10


def boxes_on(t, host):
    """The names of the boxes running on host, from its sandboxd's own records (a box's
    dataplane_url names the host that made it, not the one it woke on since)."""
    d = os.path.join(t.home(host), "service", "boxes")
    names = []
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        try:
            with open(os.path.join(d, f)) as fh:
                r = json.load(fh)
        except (OSError, ValueError):
            continue
        if r.get("workspace") == WORKSPACE and r.get("status") not in ("stopped", "deleting"):
            names.append(r["name"])
    return names


def free_slot_on(t, key, live, host, keep=()):
    """Delete one box running on host (one of live, name -> box, when it has one there; never
    one named in keep), so that the fleet's only free slot is there. StopIteration: host runs
    none."""
    on = [n for n in boxes_on(t, host) if n not in keep]
    victim = next(iter([n for n in on if n in live] + on))
    st, _ = api(host, key, "DELETE", "/v2/sandboxes/boxes/%s" % victim)
    live.pop(victim, None)
    time.sleep(3)  # its slot counted free at the host's next beat
    return st == 204


def corrupt_chunks(swift_dir, prefix):
    """Every stored chunk object under prefix with bytes flipped in place, on Swift's disk (its
    objects' names are in their metadata xattrs, pickled by Swift: our own test's files)."""
    import pickle
    n = 0
    for root, _, files in os.walk(os.path.join(swift_dir, "swift", "srv")):
        for f in files:
            if not f.endswith(".data"):
                continue
            path = os.path.join(root, f)
            raw, i = b"", 0
            while True:
                try:
                    raw += os.getxattr(path, "user.swift.metadata" + (str(i) if i else ""))
                except OSError:
                    break
                i += 1
            try:  # (Swift writes its keys and values as bytes)
                meta = pickle.loads(raw, encoding="bytes")
                name = meta.get(b"name", meta.get("name", b""))
                name = name.decode() if isinstance(name, bytes) else name
            except Exception:
                continue
            if "/%s/%s" % (BUCKET, prefix) not in name:
                continue
            with open(path, "r+b") as fh:
                size = os.fstat(fh.fileno()).st_size
                fh.seek(size // 2)
                b = fh.read(16)
                fh.seek(size // 2)
                fh.write(bytes(x ^ 0xff for x in b))
            n += 1
    return n


def snapshots(t, key, live):
    """A snapshot taken on one host restored on another from the store; then the store's
    chunks corrupted: a restore on a third host refuses, naming a chunk. live: name -> box,
    kept up to date (the boxes this deletes to make room go from it)."""
    src = live[sorted(live)[0]]
    a_host = host_of(owner_of(src))
    b_host, c_host = [i for i in range(1, HOSTS + 1) if i != a_host][:2]
    out = run(src, key, "echo kept > /root/mark; setsid sleep 1000 </dev/null >/dev/null 2>&1 & "
              "echo started")
    st, snap = api(b_host, key, "POST", "/v2/sandboxes/boxes/%s/snapshot" % src["name"],
                   {"name": "fleet-snap"})
    ok = out.strip() == "started" and st == 200 and isinstance(snap, dict) and "id" in snap
    deadline = time.time() + 300
    while ok and time.time() < deadline:
        st, snap = api(c_host, key, "GET", "/v2/sandboxes/snapshots/%s" % snap["id"])
        if st != 200 or snap.get("status") != "building":
            break
        time.sleep(1)
    ready = ok and st == 200 and snap.get("status") == "ready"
    check(ready, "a capture through fh%d of a box on fh%d is ready (in the store), seen "
          "through fh%d: %s %s" % (b_host, a_host, c_host, st,
                                   snap.get("status_message") if isinstance(snap, dict) else
                                   snap))
    if not ready:
        return
    freed = free_slot_on(t, key, live, b_host)
    t0 = time.time()
    st, rb = api(c_host, key, "POST", "/v2/sandboxes/boxes",
                 {"name": "restored", "snapshot_id": snap["id"], "mem_bytes": MEM,
                  "timeout": 240})
    secs = time.time() - t0
    where = host_of(owner_of(rb)) if st == 200 else 0
    out = run(rb, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 1000'") \
        if st == 200 else ""
    check(freed and st == 200 and where == b_host and out.startswith("kept") and
          len(out.split()) >= 2,
          "a create from it through fh%d lands on fh%d (the only free slot), restored from the "
          "store in %.1f s: the file and the background process are there (%r; %s)" % (
              c_host, where, secs, out[:80], "" if st == 200 else rb))
    t.snap = (snap, a_host, c_host)
    if st == 200:
        lazy_figures(t, rb, b_host)


def lazy_figures(t, box, host):
    """The restore was lazy: what came of its memory before its first answer (the host's log,
    once the rest followed) is less than all of it."""
    pat = re.compile(r"box %s: its memory in from the store in (\d+) ms: (\d+) MiB .*, "
                     r"(\d+) MiB of it before its first answer" % re.escape(box["id"]))
    deadline, m = time.time() + 120, None
    while time.time() < deadline and not m:
        m = pat.search(t.log(host))
        time.sleep(1)
    total, before = (int(m.group(2)), int(m.group(3))) if m else (0, 0)
    check(m is not None and before < total,
          "its memory came lazily: %d MiB of %d MiB before its first answer, all of it in %s "
          "ms" % (before, total, m.group(1) if m else "?"))


def corruption(t, key, live):
    """Every chunk of the workspace corrupted in the store (last: the store is spoiled for this
    workspace after it); the only free slot on a host that never held the snapshot: its
    restore must refuse, naming a chunk, and leave nothing running."""
    snap, _, _ = t.snap
    n = corrupt_chunks(t.a.swift_dir, "w/team/c/")
    # the host that stays (not drained, not killed), its own copy of the snapshot removed: its
    # restore pulls from the store
    c_host = next(i for i in range(1, HOSTS + 1)
                  if i not in (getattr(t, "drained", 0), getattr(t, "killed", 0)))
    sh("rm", "-rf", os.path.join(t.home(c_host), "snapshots",
                                 "api-" + snap["id"].replace("-", "")))
    cache = os.path.join(t.home(c_host), "service", "chunk-cache")  # (its chunks too)
    for f in os.listdir(cache) if os.path.isdir(cache) else []:
        os.unlink(os.path.join(cache, f))
    try:
        freed = free_slot_on(t, key, live, c_host) if n else False
    except StopIteration:
        freed = False
    for _ in range(2):  # (a slot freed may be taken first: another freed, once)
        st, bad = api(c_host, key, "POST", "/v2/sandboxes/boxes",
                      {"name": "from-bad", "snapshot_id": snap["id"], "mem_bytes": MEM,
                       "timeout": 240})
        if st != 503 or "Unschedulable" not in json.dumps(bad):
            break
        say("no room on fh%d for the restore: another slot freed there" % c_host)
        try:
            free_slot_on(t, key, live, c_host)
        except StopIteration:
            break
    msg = json.dumps(bad)
    st_get, _ = api(c_host, key, "GET", "/v2/sandboxes/boxes/from-bad")
    check(n > 0 and freed and st != 200 and "chunk" in msg and st_get == 404,
          "%d chunks corrupted in the store: a restore on fh%d refuses (%d: %.200s) and leaves "
          "no box (%d)" % (n, c_host, st, msg, st_get))


def fill_all(key, live):
    """Create boxes until no host has room (a create is then unschedulable)."""
    for n in range(HOSTS * SLOTS):
        st, b = api(1, key, "POST", "/v2/sandboxes/boxes",
                    {"name": "fill-%d" % n, "mem_bytes": MEM, "timeout": 6})
        if st != 200:
            return st == 503
        live[b["name"]] = b
    return False


def moves(t, key, live):
    """A box stopped into the store on one host; the next run through its unchanged
    dataplane_url (naming that host) wakes it on another, with its file and process."""
    src = live.pop(sorted(live)[0])
    a_host = host_of(owner_of(src))
    others = [i for i in range(1, HOSTS + 1) if i != a_host]
    out = run(src, key, "echo moved > /root/mark; setsid sleep 2000 </dev/null >/dev/null "
              "2>&1 & echo started")
    full = fill_all(key, live)
    st, _ = api(others[0], key, "POST", "/v2/sandboxes/boxes/%s/stop" % src["name"])
    deadline, status = time.time() + 300, None
    while st == 204 and time.time() < deadline:
        st2, b = api(others[1], key, "GET", "/v2/sandboxes/boxes/%s" % src["name"])
        status = b.get("status") if st2 == 200 else st2
        if status == "stopped":
            break
        time.sleep(1)
    check(out.strip() == "started" and full and st == 204 and status == "stopped",
          "a stop through fh%d of a box on fh%d: into the store and let go, seen stopped "
          "through fh%d (%s)" % (others[0], a_host, others[1], status))
    if status != "stopped":
        return
    # the slot it freed on its host taken, one freed elsewhere: it can only wake there
    st_fill, filler = api(1, key, "POST", "/v2/sandboxes/boxes",
                          {"name": "fill-a", "mem_bytes": MEM, "timeout": 60})
    fill_on = host_of(owner_of(filler)) if st_fill == 200 else 0
    freed = fill_on == a_host and free_slot_on(t, key, live, others[0])
    t0 = time.time()
    out = run(src, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 2000'")
    secs = time.time() - t0
    st, b = api(a_host, key, "GET", "/v2/sandboxes/boxes/%s" % src["name"])
    # which host runs it is not in the API (its dataplane_url stays): the hosts' logs say
    stopped_on = [i for i in range(1, HOSTS + 1)
                  if "box %s: stopped into the store" % src["id"] in t.log(i)]
    woken_on = [i for i in range(1, HOSTS + 1)
                if "box %s: woken here from the store" % src["id"] in t.log(i)]
    check(freed and out.startswith("moved") and len(out.split()) >= 2 and st == 200 and
          b.get("status") == "ready" and b.get("dataplane_url") == src["dataplane_url"] and
          stopped_on == [a_host] and woken_on == [others[0]],
          "the next execute through its dataplane_url (fh%d's) woke it in %.1f s: stopped on "
          "%s, woken on %s (the only room: fh%d; the slot it freed taken by a create: %s on "
          "fh%d), %s again, its dataplane_url unchanged, the file and the process there (%r)"
          % (a_host, secs, stopped_on, woken_on, others[0], st_fill, fill_on,
              b.get("status") if st == 200 else st, out[:60]))
    t.moved = (src, others[0])


def stop_race(t, key, live):
    """Calls that reach a box while its stop pushes it into the store wait, then go on to its
    wake: an execute at its dataplane_url (its host's), one through another host, a get by
    name through a third."""
    name = sorted(live)[0]
    box = live[name]
    home = host_of(owner_of(box))
    others = [i for i in range(1, HOSTS + 1) if i != home]
    first = run(box, key, "echo raced > /root/race; echo ok")
    st, _ = api(home, key, "POST", "/v2/sandboxes/boxes/%s/stop" % name)
    res = {}

    def one(what, fn):
        t0 = time.time()
        res[what] = (fn(), time.time() - t0)

    calls = [("execute", lambda: run(box, key, "cat /root/race")),
             ("via fh%d" % others[0], lambda: run(box, key, "cat /root/race", via=others[0])),
             ("get via fh%d" % others[1],
              lambda: api(others[1], key, "GET", "/v2/sandboxes/boxes/%s" % name)[0])]
    threads = [threading.Thread(target=one, args=c) for c in calls]
    for th in threads:
        th.start()
        time.sleep(0.2)
    for th in threads:
        th.join(400)
    stopped = "box %s: stopped into the store" % box["id"] in t.log(home)
    woken = [i for i in range(1, HOSTS + 1)
             if "box %s: woken here from the store" % box["id"] in t.log(i)]
    ok = {w: r[0] for w, r in res.items()}
    check(first.strip() == "ok" and st == 204 and stopped and len(woken) == 1 and
          ok.get("execute") == "raced\n" and ok.get("via fh%d" % others[0]) == "raced\n" and
          ok.get("get via fh%d" % others[1]) == 200,
          "calls made during a stop into the store (through fh%d): parked, then on to the "
          "wake (on fh%s): %s" % (home, woken, "; ".join(
              "%s: %r in %.1f s" % (w, r[0], r[1]) for w, r in sorted(res.items()))))


def transfer_argv(t):
    """sandbox-transfer beside this sandboxd's build, run as sandboxd is (through the loader
    and libraries api.sh copied in, where the emulated host has none of its own)."""
    sd = t.a.sandboxd[-1]
    prog = os.path.join(os.path.dirname(os.path.dirname(sd)), "tools", "transfer",
                        "sandbox-transfer")
    wrapper = os.path.join(t.work, "sandbox-transfer")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (" ".join(t.a.sandboxd[:-1]), prog))
    os.chmod(wrapper, 0o755)
    return wrapper


def hostile_imports(t, key, via):
    """What a pushing client may not send: a manifest with a proxy file, one naming a chunk
    never sent, a chunk whose bytes are not its name's."""
    import hashlib
    data = b"x" * 4096
    good = hashlib.sha256(data).hexdigest()
    r = urllib.request.Request("http://%s.%d:%d/v2/sandboxes/chunks/%s" % (
        NET, 10 + via, API_PORT, "1" * 64), data=data, method="PUT",
        headers={"X-Api-Key": key, "Content-Type": "application/octet-stream"})
    try:
        st_wrong = urllib.request.urlopen(r, timeout=60).status
    except urllib.error.HTTPError as e:
        st_wrong = e.code

    def manifest(files):
        text = "sandbox-manifest 1\ngeneration 1\nchunk_size 4096\n"
        for name in files:
            text += "file %s 4096 1 1\n0 4096\n%s\n" % (name, good)
        return (text + "end\n").encode()

    results = []
    for files in (["state.fdt", "memory", "meta.yaml", "net.credentials"],
                  ["state.fdt", "memory", "meta.yaml"]):
        r = urllib.request.Request("http://%s.%d:%d/v2/sandboxes/imports?name=hostile" % (
            NET, 10 + via, API_PORT), data=manifest(files), method="POST",
            headers={"X-Api-Key": key, "Content-Type": "text/plain"})
        try:
            with urllib.request.urlopen(r, timeout=60) as resp:
                results.append((resp.status, resp.read()[:200]))
        except urllib.error.HTTPError as e:
            results.append((e.code, e.read()[:200]))
    st_gone, _ = api(via, key, "GET", "/v2/sandboxes/boxes/hostile")
    check(st_wrong == 400 and results[0][0] == 400 and b"net.credentials" in results[0][1] and
          results[1][0] == 400 and b"was not sent" in results[1][1] and st_gone == 404,
          "hostile pushes refused: a chunk not of its name %d, a manifest with a proxy file "
          "%d %r, one naming a chunk never sent %d %r; no box made (%d)" % (
              st_wrong, results[0][0], results[0][1][:90], results[1][0], results[1][1][:90],
              st_gone))


def push_pull(t, team_key, live):
    """sandboxctl push of a local sandbox to the fleet and pull back: its files and
    processes survive both ways; the second way through another host. In a workspace of its
    own (the corruption check damaged the team's chunks, which share the image's bytes)."""
    alive = [i for i in range(1, HOSTS + 1) if i != getattr(t, "killed", 0)]
    key = t.key("laptop")
    wait_up(key, alive)
    hostile_imports(t, key, alive[0])
    for name in list(live)[:1]:  # room for it
        api(alive[0], team_key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
        live.pop(name, None)
    time.sleep(3)
    local = os.path.join(t.work, "local")
    os.makedirs(local)
    os.symlink(t.a.images, os.path.join(local, "images"))
    env = dict(os.environ, SANDBOX_HOME=local, SANDBOX_API_KEY=key,
               SANDBOX_TRANSFER=transfer_argv(t))

    def ctl(*args, timeout=600):
        p = subprocess.run(t.a.ctl + list(args), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout.strip()

    url = "http://%s.%d:%d" % (NET, 10 + alive[0], API_PORT)
    rc_c, out_c = ctl("create", "--name", "laptop", "--image", "busybox", "--memory", "128")
    rc_e, out_e = ctl("exec", "laptop", "--", "sh", "-c",
                      "echo from-the-laptop > /root/pushed; "
                      "setsid sleep 3000 </dev/null >/dev/null 2>&1 & echo ok")
    t0 = time.time()
    rc_p, out_p = ctl("push", "laptop", url, "--name", "laptop")
    push_s = time.time() - t0
    rc_ls, out_ls = ctl("ls")
    st, box = api(alive[-1], key, "GET", "/v2/sandboxes/boxes/laptop")
    # (busybox: no pgrep; the process counted in ps)
    there = run(box, key, "cat /root/pushed; ps | grep -c '[s]leep 3000'; "
                "echo from-the-fleet > /root/back") if st == 200 else "(%s)" % st
    check(rc_c == 0 and rc_e == 0 and out_e.endswith("ok") and rc_p == 0 and
          "laptop" not in out_ls and there.startswith("from-the-laptop\n1"),
          "sandboxctl push of a local sandbox to the fleet through fh%d in %.1f s (%s): its file "
          "and its process there (%r); the local one gone (%s)%s" % (
              alive[0], push_s, out_p.splitlines()[-1][:300] if out_p else "", there[:80],
              "yes" if "laptop" not in out_ls else out_ls[-200:],
              "" if rc_c == 0 and rc_e == 0 else "; create %d %r, exec %d %r" % (
                  rc_c, out_c[-300:], rc_e, out_e[-200:])))
    url2 = "http://%s.%d:%d" % (NET, 10 + alive[-1], API_PORT)
    t0 = time.time()
    rc_pl, out_pl = ctl("pull", "laptop", url2, "--as", "laptop2")
    pull_s = time.time() - t0
    rc_x, out_x = ctl("exec", "laptop2", "--", "sh", "-c",
                      "cat /root/pushed /root/back; ps | grep -c '[s]leep 3000'")
    st_gone, _ = api(alive[0], key, "GET", "/v2/sandboxes/boxes/laptop")
    check(rc_pl == 0 and rc_x == 0 and
          out_x.startswith("from-the-laptop\nfrom-the-fleet\n1") and st_gone == 404,
          "sandboxctl pull of it back through fh%d in %.1f s (%s): both files and the process "
          "here (%r); the fleet's deleted (%d)" % (
              alive[-1], pull_s, out_pl.splitlines()[-1][:160] if out_pl else "",
              out_x[:120], st_gone))
    ctl("rm", "-f", "laptop2")


def drain(t, key, live):
    """`sandboxd drain` on one host: its boxes go into the store (seen stopped), and it takes
    no more creates."""
    # the host the moved box woke on (moves): the drain stops it a second time
    x = t.moved[1] if getattr(t, "moved", None) else host_of(owner_of(live[sorted(live)[0]]))
    # all but two of its boxes deleted first: a drain of two shows what one of four would,
    # in half the pushes (the moved box stays: second_move wakes it)
    keep = [t.moved[0]["name"]] if getattr(t, "moved", None) else []
    extra = [n for n in boxes_on(t, x) if n not in keep]
    for n in extra[:max(0, len(extra) + len(keep) - 2)]:
        api(x, key, "DELETE", "/v2/sandboxes/boxes/%s" % n)
        live.pop(n, None)
    time.sleep(1)
    mine = boxes_on(t, x)  # (by its own records: a box's dataplane_url names its first host)
    argv, env = t.sandboxd(x, "drain", "--operator", "127.0.0.1:8381")
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline, stopped = time.time() + 300, 0
    while time.time() < deadline:
        stopped = sum(api(1 + x % HOSTS, key, "GET", "/v2/sandboxes/boxes/%s" % n)[1]
                      .get("status") == "stopped" for n in mine)
        if stopped == len(mine):
            break
        time.sleep(2)
    st, b = api(x, key, "POST", "/v2/sandboxes/boxes",
                {"name": "after-drain", "mem_bytes": MEM, "timeout": 30})
    where = host_of(owner_of(b)) if st == 200 else 0
    check(p.returncode == 0 and len(mine) > 0 and stopped == len(mine) and
          (st != 200 or where != x),
          "sandboxd drain on fh%d (%s): its %d boxes stopped into the store (%d seen stopped); "
          "a create through it after: %d on fh%d (not fh%d)" % (
              x, p.stdout.strip()[:120], len(mine), stopped, st, where, x))
    for n in mine:
        live.pop(n, None)
    t.drained = x
    if getattr(t, "moved", None):
        second_move(t, key, live, x)


def second_move(t, key, live, x):
    """The box moved once (moves), stopped again by the drain: its snapshot's disk stacks on
    what it was woken from, and it still wakes on another host, with its file and process."""
    src = t.moved[0]
    y = next(i for i in range(1, HOSTS + 1) if i != x)
    freed = free_slot_on(t, key, live, y)
    t0 = time.time()
    out = run(src, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 2000'", via=y)
    secs = time.time() - t0
    woken = [i for i in range(1, HOSTS + 1)
             if "box %s: woken here from the store (generation 2)" % src["id"] in t.log(i)]
    check(freed and out.startswith("moved") and len(out.split()) >= 2 and len(woken) == 1 and
          woken[0] != x,
          "the moved box, stopped again by the drain of fh%d, woke (generation 2) on fh%s in "
          "%.1f s: the file and the process there (%r)" % (x, woken, secs, out[:60]))


def host_failure(t, key, live):
    """A host's sandboxd and a NATS node killed (-9): the API answers from the others, and a
    box that host had stopped into the store wakes elsewhere."""
    drained = getattr(t, "drained", 0)
    victim = live.pop(next(n for n in sorted(live)
                           if host_of(owner_of(live[n])) != drained))
    x = host_of(owner_of(victim))
    # the other hosts; the one with room last (a drained host takes nothing)
    others = sorted((i for i in range(1, HOSTS + 1) if i != x), key=lambda i: i != drained)
    out = run(victim, key, "echo before-the-loss > /root/mark; echo ok")
    st, _ = api(others[0], key, "POST", "/v2/sandboxes/boxes/%s/stop" % victim["name"])
    deadline, status = time.time() + 300, None
    while st == 204 and time.time() < deadline:
        st2, b = api(others[1], key, "GET", "/v2/sandboxes/boxes/%s" % victim["name"])
        status = b.get("status") if st2 == 200 else st2
        if status == "stopped":
            break
        time.sleep(1)
    ck = checkpointed_box(t, x)
    # room on the hosts that stay: one of their boxes goes
    freed = free_slot_on(t, key, live, others[1])
    vmms = t.kill_host(x)
    t.killed = x
    t.kill_nats(1)
    t0, answers = time.time(), []
    for i in others:
        st_l, lst = api(i, key, "GET", "/v2/sandboxes/boxes", timeout=30)
        answers.append(st_l)
    secs_list = time.time() - t0
    t0 = time.time()
    woke = run(victim, key, "cat /root/mark", via=others[0])  # (its own host is gone)
    secs = time.time() - t0
    woken_on = [i for i in others
                if "box %s: woken here from the store" % victim["id"] in t.log(i)]
    check(out.strip() == "ok" and status == "stopped" and freed and vmms > 0 and
          answers == [200] * len(others) and woke.startswith("before-the-loss") and
          len(woken_on) == 1,
          "fh%d's power lost (its sandboxd and its %d VMMs and proxies killed -9) and a NATS "
          "node killed: lists through the others %s in %.1f s; the box fh%d had stopped woke "
          "on fh%s in %.1f s through fh%d (%r)" % (
              x, vmms, answers, secs_list, x, woken_on, secs, others[0], woke[:200]))
    lost_boxes(t, key, live, x, others)
    if ck:
        checkpoint_woken(t, ck, x, others, victim, key)


CK_WORKSPACE = "ckpt"


def checkpointed_box(t, x):
    """A box of a workspace that asked for checkpoints every 10 s, made on host x (the only
    host with room: its stopped box's slot), with a file and a background process, once its
    first checkpoint is in the store; then checkpoints are turned off and a file is written
    after it. (key, box) or None."""
    ckey = t.key(CK_WORKSPACE)
    wait_up(ckey)
    t.quota(CK_WORKSPACE, "checkpoint_s=10")
    st, ck = api(x, ckey, "POST", "/v2/sandboxes/boxes",
                 {"name": "ck", "mem_bytes": MEM, "timeout": 240})
    if st != 200 or not isinstance(ck, dict) or host_of(owner_of(ck)) != x:
        check(False, "a box of workspace %s on fh%d for its checkpoint: %s %.200s" % (
            CK_WORKSPACE, x, st, ck))
        return None
    out = run(ck, ckey, "echo at-the-checkpoint > /root/ck; sleep 3000 </dev/null >/dev/null "
              "2>&1 & echo ok")
    t0, line = time.time(), None
    want = "box %s: checkpoint in the store (generation " % ck["id"]
    while time.time() - t0 < 240 and not line:
        line = next((ln for ln in t.log(x).splitlines() if want in ln), None)
        time.sleep(1)
    t.quota(CK_WORKSPACE, "checkpoint_s=0")  # (the next one would hold what follows)
    after = run(ck, ckey, "echo after > /root/after-ck; echo ok")
    check(out.strip() == "ok" and line is not None and after.strip() == "ok",
          "a box of a workspace with checkpoint_s=10 on fh%d: %s after %.1f s" % (
              x, line.split("sandboxd: ", 1)[-1] if line else "no checkpoint", time.time() - t0))
    time.sleep(3)  # (its record, naming the checkpoint, put at the host's next tick)
    return (ckey, ck) if line else None


def checkpoint_woken(t, ck, x, others, victim, key):
    """The checkpointed box of lost host x: shown stopped (its checkpoint named) through the
    others, then a call wakes it elsewhere from its checkpoint: the file and process from
    before it, not the file written after."""
    ckey, box = ck
    t0, st, b = time.time(), 0, {}
    while time.time() - t0 < 90:
        st, b = api(others[0], ckey, "GET", "/v2/sandboxes/boxes/ck")
        if st == 200 and b.get("status") == "stopped":
            break
        time.sleep(2)
    secs = time.time() - t0
    msg = (b.get("status_message") or "") if isinstance(b, dict) else ""
    api(others[0], key, "DELETE", "/v2/sandboxes/boxes/%s" % victim["name"])  # (its slot)
    time.sleep(3)
    t1 = time.time()
    out = run(box, ckey, "cat /root/ck; ls /root/after-ck 2>&1 | grep -c 'No such'; "
              "ps | grep -c '[s]leep 3000'", via=others[0])
    woken_on = [i for i in others if "box %s: woken here from the store" % box["id"] in t.log(i)]
    check(st == 200 and b.get("status") == "stopped" and "checkpoint" in msg and
          out.split() == ["at-the-checkpoint", "1", "1"] and len(woken_on) == 1,
          "the checkpointed box of lost fh%d: stopped through fh%d %.1f s after the lost "
          "boxes (%r); woken on fh%s in %.1f s: its file and process from the checkpoint, "
          "not the file after (%r)" % (x, others[0], secs, msg[:120], woken_on,
                                       time.time() - t1, out[:200]))


def lost_boxes(t, key, live, x, others):
    """The boxes the lost host ran: once its beats have lapsed (20 s), a get and a list through
    the others show them failed, naming the host; a delete frees the name."""
    names = boxes_on(t, x)  # (its records stay on its disk, as a machine's after a power cut)
    if not names:
        check(False, "fh%d ran no box when it was lost" % x)
        return
    name = names[0]
    t0, b, st = time.time(), {}, 0
    while time.time() - t0 < 90:
        st, b = api(others[0], key, "GET", "/v2/sandboxes/boxes/%s" % name)
        if st == 200 and b.get("status") == "failed":
            break
        time.sleep(2)
    secs = time.time() - t0
    st_l, lst = api(others[1], key, "GET", "/v2/sandboxes/boxes")
    listed = [x2.get("status") for x2 in lst.get("sandboxes", []) if x2.get("name") == name] \
        if st_l == 200 else []
    st_x, _ = api(others[1], key, "POST", "/v2/sandboxes/boxes/%s/stop" % name)
    st_d, _ = api(others[1], key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
    st_g, _ = api(others[0], key, "GET", "/v2/sandboxes/boxes/%s" % name)
    live.pop(name, None)
    msg = b.get("status_message") or "" if isinstance(b, dict) else ""
    check(st == 200 and b.get("status") == "failed" and "fh%d" % x in msg and
          listed == ["failed"] and st_x == 400 and st_d == 204 and st_g == 404,
          "a box fh%d ran, its host lost: failed through fh%d after %.1f s more (%r), listed "
          "failed through fh%d (%s); a stop 400 (%d), a delete 204 (%d), then 404 (%d)" % (
              x, others[0], secs, msg[:120], others[1], listed, st_x, st_d, st_g))


def the_checks(t, key):
    """Every check but the Node scenario's, on a topology that is up."""
    res = creates(key)
    ready = {n: r[1] for n, r in res.items() if r[0] == 200 and isinstance(r[1], dict)
             and r[1].get("status") == "ready"}
    check(len(ready) == HOSTS * SLOTS,
          "%d of %d creates through the three hosts ready (%s)" % (
              len(ready), HOSTS * SLOTS,
              "; ".join("f%d: %s %.300s" % (n, r[0], r[1]) for n, r in res.items()
                        if n not in ready) or "seconds: " +
              " ".join("%.1f" % r[2] for r in res.values())))
    per = {}
    for b in ready.values():
        per[owner_of(b)] = per.get(owner_of(b), 0) + 1
    check(len(ready) > 0 and max(per.values()) <= SLOTS,
          "placement by capacity: boxes per host %s, none over %d slots" % (
              dict(sorted(per.items())), SLOTS))
    answered = 0
    for n, b in sorted(ready.items()):
        st, out = call(b["dataplane_url"] + "/execute", key, "POST",
                       {"command": "echo f%d on $(hostname)" % n, "timeout": 60})
        answered += st == 200 and isinstance(out, dict) and out.get("stdout", "").startswith(
            "f%d on" % n)
    check(answered == len(ready) > 0,
          "%d of %d sandboxes answer an execute at their dataplane_url" % (
              answered, len(ready)))

    t0 = time.time()
    st, body = api(1, key, "POST", "/v2/sandboxes/boxes",
                   {"name": "f-extra", "mem_bytes": MEM, "timeout": 8})
    err = body.get("detail", {}).get("error") if isinstance(body, dict) else None
    check(st == 503 and err == "Unschedulable",
          "a 13th create with every slot taken: %d %s after %.1f s (want 503 Unschedulable "
          "after its 8 s timeout)" % (st, err, time.time() - t0))

    found = 0
    for n in ready:
        for i in range(1, HOSTS + 1):
            st, b = api(i, key, "GET", "/v2/sandboxes/boxes/f%d" % n)
            found += st == 200 and b.get("id") == ready[n]["id"]
    check(found == len(ready) * HOSTS > 0,
          "%d of %d gets by name through every host find the box" % (
              found, len(ready) * HOSTS))
    st, lst = api(2, key, "GET", "/v2/sandboxes/boxes")
    names = sorted(b["name"] for b in lst.get("sandboxes", [])) if st == 200 else []
    check(len(names) == len(ready) and "f-extra" not in names,
          "a list through fh2 holds the %d boxes of all hosts (%d listed)" % (
              len(ready), len(names)))
    other = t.key("other")
    wait_up(other)  # (a new key reaches every host's copy within a tick)
    st_other, _ = api(1, other, "GET", "/v2/sandboxes/boxes/f0")
    check(st_other == 404, "another workspace's key gets 404 for f0 through fh1 (%d)" %
          st_other)

    if ready:
        n0 = sorted(ready)[0]
        b0 = ready[n0]
        via = next(i for i in range(1, HOSTS + 1) if "%s.%d" % (NET, 10 + i) != owner_of(b0))
        st, _ = api(via, key, "DELETE", "/v2/sandboxes/boxes/f%d" % n0)
        gone = st == 204
        deadline = time.time() + 60
        while gone and time.time() < deadline:
            st, _ = api(via, key, "GET", "/v2/sandboxes/boxes/f%d" % n0)
            if st == 404:
                break
            time.sleep(0.5)
        st2, again = api(3, key, "POST", "/v2/sandboxes/boxes",
                         {"name": "f%d" % n0, "mem_bytes": MEM, "timeout": 240})
        check(gone and st == 404 and st2 == 200 and again.get("status") == "ready",
              "a delete through fh%d (not the owner) frees the name and a slot: created "
              "again %d %s" % (via, st2, again.get("status") if isinstance(again, dict)
                               else again))
    if len(ready) > 1:
        n1 = sorted(ready)[1]
        via = next(i for i in range(1, HOSTS + 1)
                   if "%s.%d" % (NET, 10 + i) != owner_of(ready[n1]))
        st, b = api(via, key, "PATCH", "/v2/sandboxes/boxes/f%d" % n1, {"name": "moved-name"})
        st_taken, _ = api(via, key, "PATCH", "/v2/sandboxes/boxes/f%d" % sorted(ready)[2],
                          {"name": "moved-name"})
        by_new = [api(i, key, "GET", "/v2/sandboxes/boxes/moved-name")[0]
                  for i in range(1, HOSTS + 1)]
        by_old = api(via, key, "GET", "/v2/sandboxes/boxes/f%d" % n1)[0]
        check(st == 200 and b.get("name") == "moved-name" and st_taken == 409 and
              by_new == [200] * HOSTS and by_old == 404,
              "a rename through fh%d (not the owner): %d; the name again for another box: "
              "%d (want 409); found by the new name through each host %s, by the old %d" % (
                  via, st, st_taken, by_new, by_old))
    if t.store:
        # (the first two were deleted and renamed above)
        live = {b["name"]: b for n, b in ready.items()
                if n not in (sorted(ready)[0], sorted(ready)[1])}
        snapshots(t, key, live)
        moves(t, key, live)
        stop_race(t, key, live)
        drain(t, key, live)
        host_failure(t, key, live)
        if getattr(t, "snap", None):
            corruption(t, key, live)
        push_pull(t, key, live)
        pulls = [ln for i in range(1, HOSTS + 1) for ln in t.log(i).splitlines()
                 if ": pulled in " in ln or ": pulled but its memory in " in ln]
        hits = [int(m.group(1)) for m in (re.search(r"(\d+) from the cache", ln)
                                         for ln in pulls) if m]
        check(len(hits) == len(pulls) > 0 and max(hits) > 0,
              "the hosts' chunk caches: %d pulls, chunks from the cache %s" % (
                  len(pulls), hits))
        for i in range(1, HOSTS + 1):  # (the store's figures, for the record)
            for ln in t.log(i).splitlines():
                if ": in the store in " in ln or ": pulled" in ln or "memory in from" in ln:
                    say("fh%d: %s" % (i, ln.split("sandboxd: ", 1)[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", required=True)
    ap.add_argument("--bin", required=True, help="a directory with nats-server")
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--swift-dir", help="a directory with user xattrs: the object store's checks")
    ap.add_argument("sandboxd", nargs="+")
    a = ap.parse_args()
    a.ctl = [a.ctl]
    # FLEET_PART: "node" for the Node scenario only (fleet-node), else every other check
    # (fleet-api): two emulated hosts of their own, so that one that hangs costs its part's
    # retry only
    part = os.environ.get("FLEET_PART", "")
    t = Topology(a)
    try:
        t.up()
        if a.swift_dir:
            t.swift()
        key = t.key(WORKSPACE)
        for i in range(1, HOSTS + 1):
            t.serve(i)
        wait_up(key)
        check(True, "one key made with `keys create --fleet` answers on fh1, fh2 and fh3")
        if part == "node":  # (fleet-node: the scenario alone, a topology of its own)
            node_scenario(t)
        else:
            the_checks(t, key)
    except Exception as e:  # the topology failed: said, and the logs shown
        check(False, "the topology: %s" % e)
    finally:
        if failures:
            t.logs()
        t.down()
    say("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
