#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What the proxy's jail costs at start (docs/hardening.md "The proxy's jail").

usage: proxy_jail.py SANDBOX-PROXY [RUNS]   (as root)

Makes a network namespace with 10.0.2.1 and a prepared directory, then times `sandbox-proxy
run` from spawn to its "ready" on --ready-fd, unjailed then with --jail (started directly,
so the jailed one also forks into its pid namespace). Prints one line for each.
"""
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

proxy = sys.argv[1]
ns = "pjbench"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
tmp = tempfile.mkdtemp()
subprocess.run(["ip", "netns", "add", ns], check=True)
try:
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "-n", ns, "addr", "add", "10.0.2.1/32", "dev", "lo"], check=True)
    sb = os.path.join(tmp, "beef0000")
    os.mkdir(sb)
    subprocess.run([proxy, "prepare", sb, "--resolver", "127.0.0.1:53"], check=True)
    for jail in (False, True):
        times = []
        for _ in range(n):
            r, w = os.pipe()
            args = [proxy, "run", sb, "--netns", "/run/netns/" + ns, "--ready-fd", str(w)]
            if jail:
                args += ["--jail", "uid=%d,gid=%d" % (0x5001beef, 0x5001beef)]
            t0 = time.monotonic()
            p = subprocess.Popen(args, pass_fds=(w,), stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            os.close(w)
            if not select.select([r], [], [], 15)[0]:
                p.kill()
                sys.exit("no ready after 15 s")
            got = os.read(r, 16)
            t1 = time.monotonic()
            os.close(r)
            if got != b"ready\n":
                sys.exit("the proxy said %r, not ready" % got)
            times.append((t1 - t0) * 1000)
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
        print("%s: start to ready median %.1f ms (min %.1f, max %.1f, n=%d)" % (
            "jailed" if jail else "unjailed", statistics.median(times), min(times), max(times), n))
finally:
    subprocess.run(["ip", "netns", "del", ns])
    shutil.rmtree(tmp, ignore_errors=True)
