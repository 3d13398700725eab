#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Collections on a schedule (sandboxd/fleet_gc_turn.c), natively: two sandboxd hosts on
loopback in one fleet (the NATS node gc.sh started: FLEET_NATS) with Swift's S3 API as their
store (store.sh's arguments), each serving with --gc-every 2 --gc-grace-s 60. A workspace's
collections come without anyone asking, one host a turn: the first look starts its clock (one
host says so), its chunks are listed by a collection a period later, and over a window the
collections of both hosts together are one a period. (Its chunks are 3 a client sent and no
manifest names: with no manifest in the workspace the collector judges nothing, by its own
rule (store/gc.c); what a collection deletes is fleet-store's and fleet-api's to show.)

    gc_turns.py ENDPOINT ACCESS SECRET REGION WORKDIR     (env FLEET_NATS, FLEET_SANDBOXD)
"""
import hashlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

EVERY = 2
WINDOW = 12
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def main():
    endpoint, access, secret, region, work = sys.argv[1:6]
    nats, sandboxd = os.environ["FLEET_NATS"], os.environ["FLEET_SANDBOXD"]
    work = os.path.join(work, "gc-turns")
    os.makedirs(work)
    creds, fkey = os.path.join(work, "store.cred"), os.path.join(work, "fleet.key")
    with open(creds, "w") as f:
        f.write("%s\n%s\n" % (access, secret))
    with open(fkey, "wb") as f:
        f.write(os.urandom(32))
    base = 20000 + os.getpid() % 20000
    procs, logs = [], []
    try:
        for i in (1, 2):
            home = os.path.join(work, "h%d" % i)
            os.makedirs(home)
            log = os.path.join(work, "sandboxd-%d.log" % i)
            logs.append(log)
            procs.append(subprocess.Popen(
                [sandboxd, "serve", "--listen", "127.0.0.1:%d" % (base + 2 * i),
                 "--operator", "127.0.0.1:%d" % (base + 2 * i + 1), "--insecure-http",
                 "--fleet", nats, "--host-id", "t%d" % i, "--fleet-replicas", "1",
                 "--store-endpoint", endpoint, "--store-bucket", "turns",
                 "--store-region", region, "--store-credentials", creds, "--fleet-key", fkey,
                 "--gc-every", str(EVERY), "--gc-grace-s", "60"],
                env=dict(os.environ, SANDBOX_HOME=home), stdout=open(log, "w"),
                stderr=subprocess.STDOUT))
        key = subprocess.run([sandboxd, "keys", "create", "turns", "--fleet", nats],
                             env=dict(os.environ, SANDBOX_HOME=os.path.join(work, "h1")),
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        key = key.split()[0].split("=", 1)[1]
        # chunks a client sends before an import that never comes: no manifest names them
        sent = 0
        deadline = time.time() + 30
        for n in range(3):
            data = b"turn %d " % n * 512
            url = "http://127.0.0.1:%d/v2/sandboxes/chunks/%s" % (
                base + 2 + 2 * (n % 2), hashlib.sha256(data).hexdigest())
            while True:
                r = urllib.request.Request(url, data=data, method="PUT", headers={
                    "X-Api-Key": key, "Content-Type": "application/octet-stream"})
                try:
                    with urllib.request.urlopen(r, timeout=30) as resp:
                        sent += resp.status in (200, 201, 204)
                    break
                except (urllib.error.URLError, OSError):
                    if time.time() > deadline:  # (the host not up, or the key not there yet)
                        break
                    time.sleep(0.3)
        check(sent == 3, "3 chunks sent through both hosts, no manifest naming them (%d)" % sent)

        def said():
            out = []
            for log in logs:
                with open(log, errors="replace") as f:
                    out.append(f.read())
            return out

        t0 = time.time()
        ran = re.compile(r"gc turns: (done|stopped) in \d+ ms: \d+ manifests, (\d+) chunks "
                         r"listed, (\d+) deleted")
        while time.time() - t0 < 30 and not any(ran.search(s) for s in said()):
            time.sleep(0.5)
        first = [s.count("gc turns: its first collection in %d s" % EVERY) for s in said()]
        runs = [m.groups() for s in said() for m in ran.finditer(s)]
        check(sum(first) == 1 and runs and runs[0][1] == "3" and runs[0][2] == "0",
              "unasked, a collection within %.0f s: the workspace's clock started by one host "
              "(%s), then the 3 chunks listed and none deleted with no manifest to judge by "
              "(%s)" % (time.time() - t0, first, runs[:1]))
        before = [len(ran.findall(s)) for s in said()]
        time.sleep(WINDOW)
        after = [len(ran.findall(s)) for s in said()]
        per = [a - b for a, b in zip(after, before)]
        check(WINDOW // EVERY - 2 <= sum(per) <= WINDOW // EVERY + 1,
              "over %d s, collections by the two hosts %s: one a turn of %d s (%d to %d in "
              "all)" % (WINDOW, per, EVERY, WINDOW // EVERY - 2, WINDOW // EVERY + 1))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for log in logs:
                if os.path.exists(log):
                    with open(log, errors="replace") as f:
                        print("%s:\n  %s" % (log, "\n  ".join(f.read().splitlines()[-30:])))
    print("gc-turns: %d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
