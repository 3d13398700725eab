#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/dev bench hardening: what the jail and the seccomp filters cost (docs/benchmarks.md).

usage: hardening.py VMM PAYLOAD_HELLO PAYLOAD_SNAP BENCH_START [--runs N] [--execs N]

- start: spawn to the first console byte of payload-hello, sandbox-vmm --jail as sandboxctl
  starts it (cloned into a pid namespace of its own, joining the shared empty network
  namespace) against the same without, as sandboxctl forks it (bench-start alternates them:
  the jailed one is its "ours").
- exec: the round trip of a client's request through the VMM to payload-snap's vsock server
  and back, a new connection each time as `sandboxctl exec` makes one (connect, CONNECT
  1234, "ping", its answer), jailed against unjailed, alternating batches of 5. payload-snap
  polls its queues on its vCPU: the guest not being measured is paused (api.sock), so that
  only one spinning vCPU shares the 2 CPUs with the client and the measured VMM.
Per-run figures go to stderr; the last line on stdout is exactly
  hardening start_ratio=<jailed/unjailed> exec_ratio=<jailed/unjailed>
"""
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "../../tests/integration"))
import snap_probe  # noqa: E402

UID = 0x50000000 + 0xfff1  # in sandboxctl's range, unused by it (docs/hardening.md)
# The empty network namespace sandboxctl's jailed VMMs join (client/jail.c, JAIL_NETNS_PATH).
NETNS = "/run/netns/sandbox-jail"


def jail_netns():
    """Make sandboxctl's shared jail namespace if it is not there, as sandboxctl would."""
    if not os.path.exists(NETNS):
        subprocess.run(["ip", "netns", "add", os.path.basename(NETNS)], check=True)
    return NETNS


def jail_dir(base, name):
    d = os.path.join(base, name)
    os.makedirs(d)
    os.chown(d, 0, UID)
    os.chmod(d, 0o1770)
    return d


def start(vmm, bench_start, hello, base, runs):
    d = jail_dir(base, "start")
    out = subprocess.run(
        [bench_start, "--runs", str(runs), "--warmup", "2", "--name", "hardening_start",
         "--ours-newpid", "--ours", vmm, "--payload", hello, "--jail", f"{d},uid={UID},gid={UID},netns={jail_netns()}",
         "--qemu", vmm, "--payload", hello], capture_output=True, text=True, check=True)
    sys.stderr.write(out.stderr)
    m = re.search(r"median_ms=([\d.]+) qemu_microvm_median_ms=([\d.]+)", out.stdout)
    return float(m.group(1)), float(m.group(2))


API_MAGIC, API_VERSION, API_REPLY, API_PAUSE, API_RESUME = 0x41584253, 1, 0x8000, 2, 3


class Guest:
    def __init__(self, vmm, snap, d, jailed):
        self.vsock = os.path.join(d, "v.sock")
        self.api_path = os.path.join(d, "api.sock")
        self.api = None
        console = os.path.join(d, "console.log")
        args = [vmm, "--payload", snap, "--memory", "577", "--vsock", self.vsock,
                "--api", self.api_path, "--console", console, "--timeout", "600"]
        if jailed:
            args += ["--jail", f"{d},uid={UID},gid={UID},netns={jail_netns()}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if os.path.exists(console) and "snap: ready" in open(console).read():
                return
            if self.proc.poll() is not None:
                raise SystemExit(f"the VMM exited: {self.proc.stderr.read()!r}")
            time.sleep(0.05)
        raise SystemExit("payload-snap not ready in 60 s")

    def call(self, typ):
        """A PAUSE or RESUME on api.sock (wire/api_proto.h), waiting for its answer."""
        if self.api is None:
            self.api = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.api.settimeout(10)
            self.api.connect(self.api_path)
        self.api.sendall(struct.pack("<IHHII", API_MAGIC, API_VERSION, typ, 1, 0))
        hdr = b""
        while len(hdr) < 16:
            chunk = self.api.recv(16 - len(hdr))
            if not chunk:
                raise SystemExit("the VMM closed api.sock")
            hdr += chunk
        _, _, rtype, _, length = struct.unpack("<IHHII", hdr)
        body = b""
        while len(body) < length:
            chunk = self.api.recv(length - len(body))
            if not chunk:
                raise SystemExit("the VMM closed api.sock")
            body += chunk
        if rtype != typ | API_REPLY or struct.unpack_from("<i", body)[0] != 0:
            raise SystemExit(f"api.sock request {typ} failed: {body[:4].hex()}")

    def exec_once(self):
        t0 = time.perf_counter()
        sock, buf = snap_probe.connect(self.vsock, 1234, 5, 5)
        with sock:
            sock.sendall(b"ping\n")
            line = snap_probe.read_line(sock, buf, "ping", 5)
        if not line.startswith("pong"):
            raise SystemExit(f"ping answered {line!r}")
        return (time.perf_counter() - t0) * 1000

    def stop(self):
        if self.api is not None:
            self.api.close()
        self.proc.terminate()
        self.proc.wait(10)


def main():
    vmm, hello, snap, bench_start = sys.argv[1:5]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 20
    execs = int(sys.argv[sys.argv.index("--execs") + 1]) if "--execs" in sys.argv else 500
    base = tempfile.mkdtemp(prefix="bench-hardening-")
    guests = []
    try:
        s_j, s_u = start(vmm, bench_start, hello, base, runs)
        guests = [Guest(vmm, snap, jail_dir(base, "jailed"), True),
                  Guest(vmm, snap, os.path.join(base, "free"), False)] \
            if os.makedirs(os.path.join(base, "free")) is None else []
        times = ([], [])
        for g in guests:  # warm up both, then leave them paused
            for _ in range(20):
                g.exec_once()
            g.call(API_PAUSE)
        # Batches of 5, alternating and each pair in turn first: a round trip is ~0.2 ms, so
        # the machine's drifts (other work on its 2 CPUs) would otherwise outweigh the jail.
        # A batch's guest is resumed and answers one uncounted round trip first.
        for batch in range(execs // 5):
            for i, g in enumerate(guests if batch % 2 == 0 else guests[::-1]):
                k = i if batch % 2 == 0 else 1 - i
                g.call(API_RESUME)
                g.exec_once()
                times[k].extend(g.exec_once() for _ in range(5))
                g.call(API_PAUSE)
        e_j, e_u = statistics.median(times[0]), statistics.median(times[1])
        print(f"start: jailed median {s_j:.2f} ms, unjailed {s_u:.2f} ms ({runs} runs each)",
              file=sys.stderr)
        print(f"exec: jailed median {e_j:.3f} ms, unjailed {e_u:.3f} ms "
              f"(p90 {statistics.quantiles(times[0], n=10)[-1]:.3f} / "
              f"{statistics.quantiles(times[1], n=10)[-1]:.3f}; {len(times[0])} each)",
              file=sys.stderr)
        print(f"hardening start_ratio={s_j / s_u:.3f} exec_ratio={e_j / e_u:.3f}")
    finally:
        for g in guests:
            g.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
