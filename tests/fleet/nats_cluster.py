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
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from services import Servers  # noqa: E402

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
    srv = Servers("nats_cluster.py")
    routes = ",".join("nats://%s:%d" % (a.host, a.port + 2 * i + 1) for i in range(a.nodes))
    for i in range(a.nodes):
        store = os.path.join(d, "node-%d" % i)
        os.makedirs(store, exist_ok=True)
        argv = ["nats-server", "-a", a.host, "-p", str(a.port + 2 * i), "-js", "-sd", store,
                "--server_name", "n%d" % i, "-n", "n%d" % i]
        if a.nodes > 1:
            argv += ["--cluster_name", "sandbox-fleet", "--cluster",
                     "nats://%s:%d" % (a.host, a.port + 2 * i + 1), "--routes", routes]
        srv.start(argv, os.path.join(d, "node-%d.log" % i))
    srv.serve(lambda: all(answers(a.host, a.port + 2 * i) for i in range(a.nodes)),
              START_S, "nats servers=%s pids=%s" % (
                  ",".join("nats://%s:%d" % (a.host, a.port + 2 * i) for i in range(a.nodes)),
                  ",".join(str(p.pid) for p in srv.procs)))

if __name__ == "__main__":
    main()
