#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fleet's test topology (docs/fleet.md, "The service in a fleet"), made and removed by the
checks: three hosts as network namespaces (fh1..fh3, 10.77.0.11-13 on a bridge), each with its
own state directory and `sandboxd serve --fleet`, a three-node NATS cluster with JetStream on
the bridge's address, and Swift's S3 API as the object store; and the calls the checks make
through it (api_checks.py, store_checks.py, tools/bench/fleet_restore.py)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
            "--slots", str(SLOTS), "--fleet-replicas", "3",
            # a create from a snapshot waits 3 s (not 1) for the host that holds it: under
            # QEMU's emulator a loaded host may take more than 1 s to answer its poke
            "--fleet-near-ms", "3000", *store, *extra)
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


def fill_all(key, live):
    """Create boxes until no host has room (a create is then unschedulable)."""
    for n in range(HOSTS * SLOTS):
        st, b = api(1, key, "POST", "/v2/sandboxes/boxes",
                    {"name": "fill-%d" % n, "mem_bytes": MEM, "timeout": 6})
        if st != 200:
            return st == 503
        live[b["name"]] = b
    return False
