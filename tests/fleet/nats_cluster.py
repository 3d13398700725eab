#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A NATS cluster with JetStream for the fleet's tests (docs/fleet.md), started by the test
that needs it and gone with it: N nats-server processes (Debian's) on this machine's loopback,
each with its own store directory under DIR, routed to each other.

    nats_cluster.py DIR [--nodes 3] [--port P] [--host 127.0.0.1]

Node i listens for clients on P + 2i and for routes on P + 2i + 1. Prints one line once every
node accepts clients:

    nats servers=nats://HOST:P,nats://HOST:P+2,... pids=PID,PID,...

(JetStream's meta leader may take a few seconds more: a client retries its first call), then
runs until stdin ends or SIGTERM and stops the nodes. A node's pid is printed so that a test
can kill -9 one. Logs in DIR/node-i.log.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

START_S = 30


def answers(host, port):
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            return s.recv(5) == b"INFO "
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--port", type=int, default=14222)
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args()
    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    procs = []

    def stop(*_):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    routes = ",".join("nats://%s:%d" % (a.host, a.port + 2 * i + 1) for i in range(a.nodes))
    for i in range(a.nodes):
        store = os.path.join(d, "node-%d" % i)
        os.makedirs(store, exist_ok=True)
        argv = ["nats-server", "-a", a.host, "-p", str(a.port + 2 * i), "-js", "-sd", store,
                "--server_name", "n%d" % i, "-n", "n%d" % i]
        if a.nodes > 1:
            argv += ["--cluster_name", "sandbox-fleet", "--cluster",
                     "nats://%s:%d" % (a.host, a.port + 2 * i + 1), "--routes", routes]
        log = open(os.path.join(d, "node-%d.log" % i), "ab")
        procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
    deadline = time.monotonic() + START_S
    while not all(answers(a.host, a.port + 2 * i) for i in range(a.nodes)):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            for i in range(a.nodes):
                with open(os.path.join(d, "node-%d.log" % i), "rb") as f:
                    sys.stderr.write("--- node %d\n%s\n" % (
                        i, f.read()[-1500:].decode(errors="replace")))
            print("nats_cluster.py: the nodes did not answer in %d s" % START_S,
                  file=sys.stderr)
            stop()
        time.sleep(0.1)
    print("nats servers=%s pids=%s" % (
        ",".join("nats://%s:%d" % (a.host, a.port + 2 * i) for i in range(a.nodes)),
        ",".join(str(p.pid) for p in procs)), flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), stop()), daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
