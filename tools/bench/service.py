#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench service: sandboxd (issue 30) beside its anchors, in one run (tools/dev bench service;
docs/benchmarks.md, "The service").

    service.py --build BUILD --images IMAGES [--bin DIR] [--where native|emulated]

Run where Linux guests boot (natively, or inside the emulated host with every client, wrk
and nginx beside sandboxd), as root, in a fresh $SANDBOX_HOME whose images/ is IMAGES. DIR
holds wrk and nginx with their shared libraries and loader (tools/dev copies them in for
the emulated host); without it they come from PATH. Figures, each beside its anchor:

  exec_ws_ms / conn_ms      execute of `true` to its exit on an already-open WebSocket
                            (service-ws, C) / bench-exec's `conn`, the raw agent call on an
                            open connection, to the same box, each WebSocket run paired with
                            one (in turn): ROUNDS rounds, medians of the rounds' medians
  claim_ms / qemu_boot_ms   a create claimed from a warm pool (sandboxd --pool
                            busybox:1:512=1) to its first answered exec / QEMU microvm booting
                            the same kernel, initramfs and root disk to sandbox-init's ready
                            banner (tools/bench/sandbox.sh create's command, -m 512):
                            interleaved, the pool refilled before each, medians
  cold_create_ms / ctl_create_ms  a create with no pool to its first answered exec /
                            `sandboxctl create` + `sandboxctl exec ID -- true`: PAIRS
                            interleaved pairs after one uncounted, medians
  get_rps / nginx_rps       wrk against an authenticated GET /api/v2/sandboxes/boxes/NAME /
                            nginx serving the same JSON as a static file: interleaved, medians
  ws_idle_kib               RSS growth of sandboxd, the VMMs and the proxies together (VmRSS
                            of each) from before to after SOCKETS WebSockets attached to
                            silent running commands, divided by SOCKETS
  creates_100_p50/p99_ms    100 creates by 10 concurrent clients (each deletes its box before
                            its next create, untimed), all must succeed

Every step is bounded; any failure ends the run (exit 1) with what failed. Per-run figures go
to stderr, the last line to stdout:
service exec_ws_ms= conn_ms= claim_ms= qemu_boot_ms= claim_ratio= cold_create_ms=
ctl_create_ms= get_rps= nginx_rps= get_ratio= ws_idle_kib= creates_100_p50_ms=
creates_100_p99_ms= where=native|emulated
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOST, PORT, OP_PORT, NGINX_PORT = "127.0.0.1", 8380, 8381, 8390
API = "/api/v2/sandboxes"
STEP_S = 240  # one create, delete or exec: sandboxd's own create timeout is 180 s
# the anchor's QEMU command line, as tools/bench/sandbox.sh create gives it, at the boxes' size
QEMU_CMDLINE = "console=ttyS0 reboot=k panic=-1 quiet sandbox.root=/dev/vda sandbox.reboot=0"
BANNER = b"sandbox-init: ready"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def fail(msg):
    raise SystemExit("service.py: " + msg)


def describe(label, ms):
    q = sorted(ms)
    log("%s: min %.3f median %.3f p90 %.3f max %.3f ms over %d runs" % (
        label, q[0], statistics.median(q), q[max(0, int(len(q) * 0.9) - 1)], q[-1], len(q)))


def percentile(v, p):
    """Nearest-rank percentile p (0-100) of v."""
    q = sorted(v)
    k = max(1, -(-len(q) * p // 100))  # ceil
    return q[int(k) - 1]


class Service:
    """One sandboxd serve, its key, and HTTP calls to it."""

    def __init__(self, a, key, pool=None):
        self.a, self.key = a, key
        self.log = open(os.path.join(a.work, "sandboxd-%d.log" % int(time.time() * 1000)), "w")
        argv = [a.sandboxd, "serve", "--listen", "%s:%d" % (HOST, PORT), "--operator",
                "%s:%d" % (HOST, OP_PORT), "--default-image", "busybox"]
        if pool:
            argv += ["--pool", pool]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, env=a.env)
        line = self.p.stdout.readline().decode()  # bounded: sandboxd prints it or exits
        if not line.startswith("sandboxd listening "):
            self.stop()
            fail("sandboxd did not say it listens (%r); its log: %s" % (line, self.tail()))

    def tail(self):
        self.log.flush()
        with open(self.log.name) as f:
            return "".join(f.readlines()[-30:])

    def req(self, method, path, body=None, port=PORT, timeout=STEP_S):
        c = http.client.HTTPConnection(HOST, port, timeout=timeout)
        h = {"X-Api-Key": self.key}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            out = r.read()
        finally:
            c.close()
        return r.status, out

    def create(self, name, idle_ttl=None):
        body = {"name": name, "wait_for_ready": True, "timeout": 180}
        if idle_ttl is not None:
            body["idle_ttl_seconds"] = idle_ttl
        st, out = self.req("POST", API + "/boxes", body)
        if st not in (200, 201):
            fail("create %s: %d %s" % (name, st, out[:300]))
        box = json.loads(out)
        if box.get("status") != "ready" or not box.get("dataplane_url"):
            fail("create %s: not ready: %s" % (name, out[:300]))
        return box

    def first_exec(self, box):
        """POST {D}/execute of `true`, as the JS client sends it without `ws`."""
        dp = box["dataplane_url"]
        path = dp[dp.index("/", len("http://")):]
        st, out = self.req("POST", path + "/execute",
                           {"command": "true", "timeout": 60, "shell": "/bin/bash"})
        if st != 200 or json.loads(out).get("exit_code") != 0:
            fail("exec in %s: %d %s" % (box["name"], st, out[:300]))

    def delete(self, name):
        """Delete, then wait until it is gone (so no delete runs beside the next timing)."""
        st, out = self.req("DELETE", API + "/boxes/" + name)
        if st not in (200, 202, 204):
            fail("delete %s: %d %s" % (name, st, out[:300]))
        deadline = time.monotonic() + STEP_S
        while time.monotonic() < deadline:
            if self.req("GET", API + "/boxes/" + name)[0] == 404:
                return
            time.sleep(0.1)
        fail("box %s still there %d s after its delete" % (name, STEP_S))

    def pool_ready(self):
        st, out = self.req("GET", "/metrics", port=OP_PORT)
        m = re.search(rb"^sandboxd_pool_ready\{[^}]*\} ([0-9]+)$", out, re.M)
        return int(m.group(1)) if st == 200 and m else 0

    def wait_pool(self, n=1):
        deadline = time.monotonic() + STEP_S
        while time.monotonic() < deadline:
            if self.pool_ready() >= n:
                return
            time.sleep(0.2)
        fail("the warm pool did not refill within %d s; sandboxd's log: %s" % (
            STEP_S, self.tail()))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def run(argv, timeout=STEP_S, **kw):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       check=False, **kw)
    if p.returncode != 0:
        fail("%s exited %d: %s" % (os.path.basename(argv[0]), p.returncode,
                                   p.stderr.decode(errors="replace")[-2000:]))
    return p


def sandbox_dir_of(a, box):
    """The lifecycle layer's directory of the only sandbox there is (the box's)."""
    d = os.path.join(os.environ["SANDBOX_HOME"], "sandboxes")
    dirs = [x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))]
    if len(dirs) != 1:
        fail("expected one sandbox for box %s, found %s" % (box["name"], dirs))
    return os.path.join(d, dirs[0])


def exec_series(a, sd, box, rounds):
    """exec_ws against conn, run by run in turn; medians of the rounds' medians."""
    vsock = os.path.join(sandbox_dir_of(a, box), "vsock.sock")
    ws, ws_sh, ws_true, conn, conn_series, session, conn_sh = [], [], [], [], [], [], []
    started = {"/bin/bash": [], "/bin/sh": [], "/bin/true": []}
    for _ in range(rounds):
        # /bin/true as the "shell" runs what conn runs, `true` and no shell (it ignores "-c
        # true"): the service path's own cost, apart from a shell's start
        # the headline's runs each paired with the anchor's (conn: the same EXEC as
        # bench-exec's, on an agent connection of the same box), taken in turn
        for shell, out in (("/bin/bash", ws), ("/bin/sh", ws_sh), ("/bin/true", ws_true)):
            argv = [a.service_ws, "exec", "--url", box["dataplane_url"], "--key", sd.key,
                    "--runs", "20", "--warmup", "3", "--shell", shell]
            if shell == "/bin/bash":
                argv += ["--conn", vsock]
            p = run(argv)
            out.append(float(re.search(r"median_ms=([0-9.]+)", p.stdout.decode()).group(1)))
            if shell == "/bin/bash":
                conn.append(float(re.search(r"conn_ms=([0-9.]+)", p.stdout.decode()).group(1)))
            m = re.search(r"execute to started: .* median ([0-9.]+) ", p.stderr.decode())
            started[shell].append(float(m.group(1)) if m else float("nan"))
        p = run([a.bench_exec, "--runs", "20", "--warmup", "3", "--socket", vsock])
        m = re.search(r"bench: conn:.* median ([0-9.]+) ", p.stderr.decode())
        if not m:
            fail("bench-exec printed no conn median")
        conn_series.append(float(m.group(1)))
        m = re.search(r"bench: session:.* median ([0-9.]+) ", p.stderr.decode())
        session.append(float(m.group(1)) if m else float("nan"))
        m = re.search(r"bench: conn-sh:.* median ([0-9.]+) ", p.stderr.decode())
        conn_sh.append(float(m.group(1)) if m else float("nan"))
    log("exec_ws (shell /bin/bash, the clients' default) round medians: %s ms" %
        " ".join("%.3f" % x for x in ws))
    log("exec_ws with shell /bin/sh (no bash fallback) round medians: %s ms" %
        " ".join("%.3f" % x for x in ws_sh))
    log("exec_ws with shell /bin/true (no shell: the program conn runs) round medians: %s ms" %
        " ".join("%.3f" % x for x in ws_true))
    log("conn (the same EXEC as bench-exec's, each run paired with an exec_ws run) round "
        "medians: %s ms" % " ".join("%.3f" % x for x in conn))
    log("conn (bench-exec, a series of its own) round medians: %s ms" %
        " ".join("%.3f" % x for x in conn_series))
    log("session (bench-exec: SESSION_EXEC of true to EXIT, no sandboxd) round medians: %s ms" %
        " ".join("%.3f" % x for x in session))
    log("conn-sh (bench-exec: EXEC of /bin/sh -c true, the guest work of an execute of true) "
        "round medians: %s ms" % " ".join("%.3f" % x for x in conn_sh))
    for shell, v in started.items():
        log("exec_ws with shell %s: execute to started, round medians: %s ms" % (
            shell, " ".join("%.3f" % x for x in v)))
    return statistics.median(ws), statistics.median(conn)


def wrk(a, url, key, seconds):
    argv = a.tool("wrk") + ["-t1", "-c8", "-d%ds" % seconds, "-H", "X-Api-Key: " + key, url]
    out = run(argv, timeout=seconds + 60).stdout.decode()
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses: ([0-9]+)|Socket errors: (.*)", out)
    if not m or bad:
        fail("wrk against %s: %s" % (url, out[-800:]))
    return float(m.group(1))


def get_series(a, sd, box, rounds, seconds):
    """wrk: sandboxd's authenticated GET of the box against nginx serving its JSON."""
    path = API + "/boxes/" + box["name"]
    st, body = sd.req("GET", path)
    if st != 200:
        fail("GET %s: %d" % (path, st))
    ng = os.path.join(a.work, "nginx")
    os.makedirs(os.path.join(ng, "www"))
    with open(os.path.join(ng, "www", "box.json"), "wb") as f:
        f.write(body)
    with open(os.path.join(ng, "nginx.conf"), "w") as f:
        f.write("""daemon off;
master_process off;
worker_processes 1;
error_log stderr error;
pid %(d)s/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(d)s/body; proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fcgi; uwsgi_temp_path %(d)s/uwsgi; scgi_temp_path %(d)s/scgi;
    default_type application/json;
    server { listen %(h)s:%(p)d; location / { root %(d)s/www; } }
}
""" % {"d": ng, "h": HOST, "p": NGINX_PORT})
    nginx = subprocess.Popen(a.tool("nginx") + ["-p", ng, "-e", "stderr", "-c",
                                                os.path.join(ng, "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ok = False
        for _ in range(100):
            try:
                c = http.client.HTTPConnection(HOST, NGINX_PORT, timeout=5)
                c.request("GET", "/box.json")
                r = c.getresponse()
                ok = r.status == 200 and r.read() == body
                c.close()
                break
            except OSError:
                time.sleep(0.1)
        if not ok:
            fail("nginx did not serve the box's JSON")
        sdr, ngr = [], []
        for _ in range(rounds):
            sdr.append(wrk(a, "http://%s:%d%s" % (HOST, PORT, path), sd.key, seconds))
            ngr.append(wrk(a, "http://%s:%d/box.json" % (HOST, NGINX_PORT), sd.key, seconds))
        log("get: sandboxd %s req/s, nginx %s req/s (%d bytes of JSON, wrk -t1 -c8 -d%ds)" % (
            " ".join("%.0f" % x for x in sdr), " ".join("%.0f" % x for x in ngr), len(body),
            seconds))
        return statistics.median(sdr), statistics.median(ngr)
    finally:
        nginx.terminate()
        try:
            nginx.wait(10)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait()


def cold_ctl_series(a, sd, pairs):
    cold, ctl = [], []
    for i in range(-1, pairs):
        t0 = time.monotonic()
        box = sd.create("cold%d" % (i + 1))
        cm = (time.monotonic() - t0) * 1000
        sd.first_exec(box)
        c = (time.monotonic() - t0) * 1000
        sd.delete(box["name"])
        t0 = time.monotonic()
        sid = run([a.ctl, "create", "--image", "busybox", "--memory", "512"]).stdout.decode().strip()
        run([a.ctl, "exec", "--timeout", "60", sid, "--", "true"])
        t = (time.monotonic() - t0) * 1000
        run([a.ctl, "rm", "-f", sid])
        log("%s %d: cold create %.1f ms (POST /boxes %.1f + first exec %.1f), sandboxctl "
            "create %.1f ms" % ("warmup" if i < 0 else "pair", i + 1, c, cm, c - cm, t))
        if i >= 0:
            cold.append(c)
            ctl.append(t)
    describe("cold_create: POST /boxes (no pool) to the first answered exec", cold)
    describe("ctl_create: sandboxctl create + exec true", ctl)
    return statistics.median(cold), statistics.median(ctl)


def qemu_boot(a):
    img = os.path.join(a.images, "busybox")
    argv = ["qemu-system-x86_64", "-M", "microvm,acpi=off", "-accel", "kvm", "-cpu", "host",
            "-m", "512", "-smp", "1", "-nodefaults", "-no-user-config", "-nographic",
            "-no-reboot", "-serial", "stdio", "-kernel", os.path.join(img, "kernel"),
            "-initrd", os.path.join(img, "initrd"), "-append", QEMU_CMDLINE, "-drive",
            "id=root,file=%s,format=raw,if=none,snapshot=on" % os.path.join(img, "rootfs"),
            "-device", "virtio-blk-device,drive=root"]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    seen, ms = b"", None
    try:
        deadline = t0 + 120
        while time.monotonic() < deadline:
            chunk = os.read(p.stdout.fileno(), 4096)  # QEMU's console never stalls long
            if not chunk:
                break
            seen = seen[-64:] + chunk
            if BANNER in seen:
                ms = (time.monotonic() - t0) * 1000
                break
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    if ms is None:
        fail("QEMU microvm printed no %r within 120 s" % BANNER)
    return ms


def claim_series(a, key, pairs):
    sd = Service(a, key, pool="busybox:1:512=1")
    claim, qemu = [], []
    try:
        for i in range(-1, pairs):
            sd.wait_pool()
            t0 = time.monotonic()
            box = sd.create("claim%d" % (i + 1))
            cm = (time.monotonic() - t0) * 1000
            sd.first_exec(box)
            c = (time.monotonic() - t0) * 1000
            t1 = time.monotonic()
            sd.first_exec(box)
            second = (time.monotonic() - t1) * 1000
            sd.delete(box["name"])
            sd.wait_pool()
            q = qemu_boot(a)
            log("%s %d: claim %.1f ms (POST /boxes %.1f + first exec %.1f; the next exec "
                "%.1f), QEMU microvm boot %.1f ms" % ("warmup" if i < 0 else "pair", i + 1, c,
                                                       cm, c - cm, second, q))
            if i >= 0:
                claim.append(c)
                qemu.append(q)
    finally:
        sd.stop()
    describe("claim: POST /boxes from the warm pool to the first answered exec", claim)
    describe("qemu_boot: QEMU microvm to sandbox-init: ready", qemu)
    return statistics.median(claim), statistics.median(qemu)


def creates_100(sd, clients, per_client):
    def client(w):
        out = []
        for i in range(per_client):
            name = "many%d-%d" % (w, i)
            t0 = time.monotonic()
            sd.create(name)
            out.append((time.monotonic() - t0) * 1000)
            log("creates: client %d, create %d: %.1f ms" % (w, i + 1, out[-1]))
            sd.delete(name)
        return out

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        ms = [x for r in ex.map(client, range(clients)) for x in r]
    log("creates_100: %d creates by %d clients in %.1f s" % (
        len(ms), clients, time.monotonic() - t0))
    describe("creates_100: POST /boxes (wait_for_ready), %d at a time" % clients, ms)
    return percentile(ms, 50), percentile(ms, 99)


def service_rss(sd_pid, home):
    """KiB of VmRSS of sandboxd and of every VMM and proxy of this $SANDBOX_HOME, by pid."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                comm = f.read().strip()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
            with open("/proc/%s/status" % pid) as f:
                status = f.read()
        except OSError:
            continue
        ours = int(pid) == sd_pid or (
            comm in ("sandbox-vmm", "sandbox-proxy") and home.encode() in cmd)
        m = re.search(r"^VmRSS:\s+([0-9]+) kB", status, re.M)
        if ours and m:
            out[int(pid)] = (comm, int(m.group(1)))
    return out


def ws_idle(a, sd, boxes, commands, sockets):
    made = [sd.create("idle%d" % i, a.idle_ttl) for i in range(boxes)]
    home = os.environ["SANDBOX_HOME"]
    p = subprocess.Popen([a.service_ws, "hold", "--key", sd.key, "--commands", str(commands),
                          "--sockets", str(sockets)] +
                         [x for b in made for x in ("--url", b["dataplane_url"])],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def expect(word, timeout):
        # (a line, or service-ws's end: its own waits are bounded, the pipe then closes)
        line = p.stdout.readline().decode()
        if not line.startswith(word):
            p.kill()
            fail("service-ws hold: %r instead of %s" % (line, word))
        return line

    try:
        expect("commands started=", STEP_S)
        time.sleep(2)  # the start sockets' detaches settle
        before = service_rss(sd.p.pid, home)
        t0 = time.monotonic()
        p.stdin.write(b"attach\n")
        p.stdin.flush()
        expect("attached sockets=", 900)
        attach_s = time.monotonic() - t0
        time.sleep(a.idle_hold)  # idle, as such sockets are: RSS then, and none may drop
        after = service_rss(sd.p.pid, home)
        p.stdin.write(b"close\n")
        p.stdin.flush()
        expect("closed lost=0", 120)
        p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if set(before) != set(after):
        fail("the processes measured changed while the sockets attached: %s -> %s" % (
            sorted(before), sorted(after)))
    for pid in sorted(before):
        log("ws_idle: pid %d %s VmRSS %d -> %d KiB" % (
            pid, before[pid][0], before[pid][1], after[pid][1]))
    grow = sum(v[1] for v in after.values()) - sum(v[1] for v in before.values())
    by = {}
    for pid in before:
        by[before[pid][0]] = by.get(before[pid][0], 0) + after[pid][1] - before[pid][1]
    log("ws_idle: %d sockets on %d commands (%d boxes x %d `sleep 3600`, up to %d sockets a "
        "command) attached in %.1f s; RSS growth %d KiB: %s" % (
            sockets, boxes * commands, boxes, commands, -(-sockets // (boxes * commands)),
            attach_s, grow, ", ".join("%s %d KiB" % kv for kv in sorted(by.items()))))
    for b in made:
        sd.delete(b["name"])
    return grow / sockets


def only(a, key):
    """One part alone (--only), its figures as the last line, sandboxd's log before it."""
    if a.only == "claim":
        print("service claim_ms=%.1f qemu_boot_ms=%.1f" % claim_series(a, key, a.pairs))
        return
    sd = Service(a, key)
    try:
        if a.only in ("exec", "get"):
            box = sd.create("bench")
            sd.first_exec(box)
            if a.only == "exec":
                out = "exec_ws_ms=%.3f conn_ms=%.3f" % exec_series(a, sd, box, a.rounds)
            else:
                out = "get_rps=%.0f nginx_rps=%.0f" % get_series(a, sd, box, 3, a.wrk_seconds)
        elif a.only == "cold":
            out = "cold_create_ms=%.1f ctl_create_ms=%.1f" % cold_ctl_series(a, sd, a.pairs)
        elif a.only == "idle":
            out = "ws_idle_kib=%.2f" % ws_idle(a, sd, a.idle_boxes, a.idle_commands, a.sockets)
        elif a.only == "creates":
            out = "creates_100_p50_ms=%.1f creates_100_p99_ms=%.1f" % creates_100(
                sd, a.creates_clients, a.creates // a.creates_clients)
        else:
            fail("--only: no part %r" % a.only)
    finally:
        log("sandboxd's log ends: " + sd.tail())
    print("service " + out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--bin", help="wrk and nginx with their libraries and loader")
    ap.add_argument("--where", default="native", choices=("native", "emulated"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--wrk-seconds", type=int, default=5)
    ap.add_argument("--sockets", type=int, default=10000)
    ap.add_argument("--idle-boxes", type=int, default=6)
    ap.add_argument("--idle-commands", type=int, default=60)
    ap.add_argument("--idle-hold", type=int, default=10)
    ap.add_argument("--idle-ttl", type=int, help="the idle boxes' idle_ttl_seconds")
    ap.add_argument("--creates", type=int, default=100)
    ap.add_argument("--creates-clients", type=int, default=10)
    ap.add_argument("--only", help="one part (exec, get, cold, idle, creates, claim): a "
                    "diagnosis, with sandboxd's log at the end; the last line has its figures only")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    a.sandboxd = os.path.join(b, "sandboxd", "sandboxd")
    a.ctl = os.path.join(b, "tools", "sandboxctl", "sandboxctl")
    a.bench_exec = os.path.join(b, "tools", "bench", "bench-exec")
    a.service_ws = os.path.join(b, "tools", "bench", "service-ws")
    if a.bin:
        ld = os.path.join(a.bin, "ld-linux-x86-64.so.2")
        a.tool = lambda n: [ld, "--library-path", a.bin, os.path.join(a.bin, n)]
    else:
        a.tool = lambda n: [shutil.which(n) or fail("no %s on PATH (apt-get install %s)" % (n, n))]
    for f in (a.sandboxd, a.ctl, a.bench_exec, a.service_ws):
        if not os.access(f, os.X_OK):
            fail("no %s (is it built?)" % f)
    if not os.path.isfile(os.path.join(a.images, "busybox", "kernel")):
        fail("no busybox image in %s (tools/dev setup)" % a.images)
    # 10,000 sockets on each side, sandboxd's links and the VMMs' files
    resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
    a.work = tempfile.mkdtemp(prefix="bench-service.")
    home = tempfile.mkdtemp(prefix="bench-service-home.")
    os.symlink(os.path.abspath(a.images), os.path.join(home, "images"))
    os.environ["SANDBOX_HOME"] = home
    a.env = dict(os.environ)
    a.env.setdefault("SANDBOX_VMM", os.path.join(b, "vmm", "sandbox-vmm"))
    a.env["SANDBOX_PROXY"] = os.path.join(b, "proxy", "sandbox-proxy")
    os.environ.update({"SANDBOX_VMM": a.env["SANDBOX_VMM"],
                       "SANDBOX_PROXY": a.env["SANDBOX_PROXY"]})
    sd = None
    try:
        line = run([a.sandboxd, "keys", "create", "bench"]).stdout.decode()
        key = re.match(r"key=(\S+) id=", line).group(1)
        if a.only:
            return only(a, key)
        sd = Service(a, key)
        box = sd.create("bench")
        sd.first_exec(box)
        exec_ws, conn = exec_series(a, sd, box, a.rounds)
        get_rps, nginx_rps = get_series(a, sd, box, 3, a.wrk_seconds)
        sd.delete(box["name"])
        cold, ctl = cold_ctl_series(a, sd, a.pairs)
        kib = ws_idle(a, sd, a.idle_boxes, a.idle_commands, a.sockets)
        p50, p99 = creates_100(sd, a.creates_clients, a.creates // a.creates_clients)
        sd.stop()
        sd = None
        claim, qemu = claim_series(a, key, a.pairs)
    except SystemExit:
        if sd:
            log("sandboxd's log ends: " + sd.tail())
        raise
    finally:
        if sd:
            sd.stop()
        for d in os.listdir(os.path.join(home, "sandboxes")) if os.path.isdir(
                os.path.join(home, "sandboxes")) else []:
            subprocess.run([a.ctl, "rm", "-f", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=STEP_S, check=False)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(a.work, ignore_errors=True)
    print("service exec_ws_ms=%.3f conn_ms=%.3f claim_ms=%.1f qemu_boot_ms=%.1f claim_ratio=%.3f "
          "cold_create_ms=%.1f ctl_create_ms=%.1f get_rps=%.0f nginx_rps=%.0f get_ratio=%.3f "
          "ws_idle_kib=%.2f creates_100_p50_ms=%.1f creates_100_p99_ms=%.1f where=%s" % (
              exec_ws, conn, claim, qemu, claim / qemu, cold, ctl, get_rps, nginx_rps,
              get_rps / nginx_rps, kib, p50, p99, a.where))


if __name__ == "__main__":
    main()
