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
The SDK's series runs twice, before and after bench-exec's, and its median is over both, so
the load of the machine (the emulated host's especially) falls on the three alike. The last
line: sdk run_ms=<sdk> conn_ms=<conn> cli_ms=<cli>. The goal is run_ms <= conn_ms + 1 ms.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "sdk", "python"))
from sandbox_sdk import Sandbox  # noqa: E402


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
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()
    sb = Sandbox.connect(a.id, sandboxctl=a.ctl)
    first = series(sb, a.runs, 5)
    p = subprocess.run([a.bench_exec, "--runs", str(a.runs), "--socket",
                        os.path.join(os.environ.get("SANDBOX_HOME", "/var/lib/sandbox"),
                                     "sandboxes", sb.id, "vsock.sock"),
                        "--ctl", a.ctl, "--id", sb.id],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    sys.stderr.write(p.stderr.decode())
    if p.returncode != 0:
        sys.exit("sdk.py: bench-exec failed (status %d)" % p.returncode)
    medians = dict(re.findall(r"bench: (conn|process):.* median ([0-9.]+) ", p.stderr.decode()))
    if set(medians) != {"conn", "process"}:
        sys.exit("sdk.py: bench-exec printed no conn or process median")
    second = series(sb, a.runs, 0)
    describe("sdk: Sandbox.run(['true']) on its open connection (before bench-exec)", first)
    describe("sdk: the same after bench-exec", second)
    describe("sdk: both series", first + second)
    sb.close()
    print("sdk run_ms=%.3f conn_ms=%s cli_ms=%s" % (statistics.median(first + second),
                                                    medians["conn"], medians["process"]))


if __name__ == "__main__":
    main()
