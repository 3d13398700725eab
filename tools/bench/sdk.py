#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench sdk: what the Python SDK adds to a command's round trip (tools/dev bench sdk;
docs/benchmarks.md, "sdk").

    sdk.py --id ID --bench-exec BENCH_EXEC --ctl SANDBOXCTL [--runs N]

On the running sandbox ID, in one run:
  sdk   Sandbox.run(["true"]) on the SDK's open connection: from the call to its result
  conn  bench-exec's `conn`: one EXEC of `true` on an agent connection open in C, send of
        the EXEC frame to arrival of its EXIT frame
  cli   bench-exec's `process`: a whole `sandboxctl exec ID -- true`
  raw   for reference: the same EXEC from Python on a bare connection, its frame made
        once, read until EXIT: Python's own floor, without the SDK
The machine's load drifts (the emulated host's especially), so the series are interleaved:
ROUNDS rounds of (sdk, raw, bench-exec, sdk), each of RUNS runs after a warmup, and each
figure is the median over all its rounds. The last line:
sdk run_ms=<sdk> conn_ms=<conn> cli_ms=<cli>. The goal is run_ms <= conn_ms + 1 ms.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "sdk", "python"))
from sandbox_sdk import Sandbox  # noqa: E402
from sandbox_sdk import _conn, _host, _wire as w  # noqa: E402


def series(sb, runs, warmup):
    for _ in range(warmup):
        sb.run(["true"])
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = sb.run(["true"])
        out.append((time.perf_counter() - t0) * 1000)
        assert r.exit_code == 0
    return out


def raw_series(vsock, runs, warmup):
    """EXEC of true on a bare connection, its frame made once: Python's floor."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(vsock)
    dec, _ = _conn.vsock_handshake(s, time.monotonic() + 10)
    s.settimeout(None)
    env = ["%s=%s" % kv for kv in _host.DEFAULT_ENV]
    out = []
    for i in range(warmup + runs):
        data = w.frame(w.MSG_EXEC, i + 1, w.exec_payload(["true"], env))
        t0 = time.perf_counter()
        s.sendall(data)
        done = False
        while not done:
            for msg_type, _, payload in dec.feed(s.recv(65536)):
                done = done or msg_type == w.MSG_EXIT
        if i >= warmup:
            out.append((time.perf_counter() - t0) * 1000)
    s.close()
    return out


def describe(label, ms):
    q = sorted(ms)
    print("bench: %s: min %.3f median %.3f p90 %.3f max %.3f ms over %d runs" % (
        label, q[0], statistics.median(q), q[int(len(q) * 0.9) - 1], q[-1], len(q)),
        file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--id", required=True)
    ap.add_argument("--bench-exec", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    sb = Sandbox.connect(a.id, sandboxctl=a.ctl)
    vsock = os.path.join(os.environ.get("SANDBOX_HOME", "/var/lib/sandbox"), "sandboxes",
                         sb.id, "vsock.sock")
    sdk, raw, conn, cli = [], [], [], []
    for _ in range(a.rounds):
        sdk += series(sb, a.runs, 5)
        raw += raw_series(vsock, a.runs, 5)
        p = subprocess.run([a.bench_exec, "--runs", str(a.runs), "--warmup", "5", "--socket",
                            vsock, "--ctl", a.ctl, "--id", sb.id],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if p.returncode != 0:
            sys.stderr.write(p.stderr.decode())
            sys.exit("sdk.py: bench-exec failed (status %d)" % p.returncode)
        m = dict(re.findall(r"bench: (conn|process):.* median ([0-9.]+) ", p.stderr.decode()))
        if set(m) != {"conn", "process"}:
            sys.exit("sdk.py: bench-exec printed no conn or process median")
        conn.append(float(m["conn"]))
        cli.append(float(m["process"]))
        sdk += series(sb, a.runs, 0)
    sb.close()
    describe("sdk: Sandbox.run(['true']) on its open connection", sdk)
    describe("raw: the same EXEC from Python on a bare connection", raw)
    print("bench: conn: bench-exec's medians, round by round: %s ms" %
          " ".join("%.3f" % x for x in conn), file=sys.stderr)
    print("bench: cli: bench-exec's process medians, round by round: %s ms" %
          " ".join("%.3f" % x for x in cli), file=sys.stderr)
    print("sdk run_ms=%.3f conn_ms=%.3f cli_ms=%.3f" % (
        statistics.median(sdk), statistics.median(conn), statistics.median(cli)))


if __name__ == "__main__":
    main()
