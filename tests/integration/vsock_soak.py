#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The vsock soak natively: payload-soak (tests/guests/soak.c) and vsock-soak
(tools/bench/vsock_soak.c), which checks every byte and checksum both ways.

usage: vsock_soak.py VMM PAYLOAD_SOAK VSOCK_SOAK one|one-jailed [DRIVER ARGS...]
       vsock_soak.py VMM PAYLOAD_SOAK VSOCK_SOAK many N SECONDS

one:  one VMM (--memory 64), the driver with DRIVER ARGS against it (e.g. --soak-gib 1), then
      SIGTERM: the driver passes, the VMM exits 7, the console has no "soak: warn" or FAIL.
      Before the driver, bad command lines get ERROR, and a long line or data while the guest
      sends end that connection. one-jailed: the same with the VMM under --jail (its
      directory its root, uid JAIL_UID, seccomp), as sandboxctl runs it.
many: N VMMs at once, each with its own directory, its guest up, then N drivers at once, each
      exchanging data with its VMM for SECONDS (both ways, checksummed), then every VMM
      stopped with SIGTERM. Checked: every driver passed and moved data (nothing lost), every
      VMM exited 7 with no guest warning, and nothing is left: no VMM process, no socket or
      file in the directories but the console logs we asked for (removed, then the
      directories), no unix socket bound under them, this process's fd count as before.
Skips (77) without a usable /dev/kvm.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

READY = "soak: ready port=5000"
JAIL_UID = 0x50000000 + 0xfff1  # in sandboxctl's range (docs/hardening.md), unused by it
SUMMARY = re.compile(r"^vsock-soak bytes=(\d+) .* send_bytes=(\d+) recv_bytes=(\d+) "
                     r"echo_bytes=(\d+) failures=(\d+) ", re.M)
# What a VMM stopped by SIGTERM says on stderr without a --jail; any other line fails the run.
VMM_EXPECTED = ("sandbox-vmm: warning: no --jail: this VMM runs with its full privileges",
                "sandbox-vmm: error: stopped by signal 15")


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


class Vm:
    def __init__(self, vmm, payload, root, name, timeout, jail=False):
        self.dir = os.path.join(root, name)
        os.mkdir(self.dir)
        extra = []
        if jail:
            # As sandboxctl makes a sandbox's directory (docs/hardening.md): root's, the
            # jail's group may add files, sticky so that it cannot touch root's.
            os.chown(root, 0, 0)
            os.chmod(root, 0o755)
            os.chown(self.dir, 0, JAIL_UID)
            os.chmod(self.dir, 0o1770)
            extra = ["--jail", f"{self.dir},uid={JAIL_UID},gid={JAIL_UID}"]
        self.vsock = os.path.join(self.dir, "v.sock")
        self.console = os.path.join(self.dir, "console.log")
        self.err = open(os.path.join(self.dir, "vmm.err"), "w")
        self.warns_expected = set()  # starts of guest warnings a test caused on purpose
        self.proc = subprocess.Popen(
            [vmm, "--payload", payload, "--memory", "64", "--vsock", self.vsock,
             "--console", self.console, "--timeout", str(timeout)] + extra,
            stdin=subprocess.DEVNULL, stdout=self.err, stderr=subprocess.STDOUT)

    def text(self, name):
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def up(self):
        """True once the guest said it is ready; fails when the VMM died first."""
        if self.proc.poll() is not None:
            fail(f"{self.dir}: the VMM exited {self.proc.returncode} before the guest was up: "
                 f"{self.text('vmm.err')[-500:]} {self.text('console.log')[-500:]}")
        return READY in self.text("console.log")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def reap(self):
        """Waits for the stopped VMM; its exit status (7: stopped by the signal)."""
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail(f"{self.dir}: the VMM did not exit within 30 s of SIGTERM")
        self.err.close()
        return self.proc.returncode

    def check_clean_exit(self):
        st = self.reap()
        console = self.text("console.log")
        if st != 7:
            fail(f"{self.dir}: the VMM exited {st}, want 7: {self.text('vmm.err')[-500:]}")
        warns = [l for l in console.splitlines()
                 if l.startswith(("soak: warn", "soak: FAIL")) and
                 not l.startswith(tuple(self.warns_expected))]
        if warns:
            fail(f"{self.dir}: the guest complained: {warns[:10]}")
        other = [l for l in self.text("vmm.err").splitlines() if l not in VMM_EXPECTED]
        if other:
            fail(f"{self.dir}: the VMM said: {other[:10]}")


def wait_up(vms, timeout):
    deadline = time.monotonic() + timeout
    waiting = list(vms)
    while waiting:
        waiting = [vm for vm in waiting if not vm.up()]
        if waiting and time.monotonic() > deadline:
            fail(f"{len(waiting)} guests not up in {timeout} s, e.g. {waiting[0].dir}: "
                 f"{waiting[0].text('console.log')[-300:]}")
        time.sleep(0.05)


def summary(out, who):
    m = SUMMARY.search(out)
    if not m:
        fail(f"{who}: no summary line in {out[-500:]!r}")
    return [int(g) for g in m.groups()]  # bytes, send, recv, echo, failures


def fds():
    return sorted(os.listdir("/proc/self/fd"))


def unix_sockets_under(root):
    with open("/proc/net/unix") as f:
        return [line.split()[-1] for line in f if root in line]


def vmm_processes(vmm, root):
    """PIDs of VMMs still running with an argument under root."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == os.path.basename(vmm).encode() and \
                any(root.encode() in a for a in argv):
            pids.append(int(pid))
    return pids


def guest_conn(vm):
    """A socket connected to the guest's port 5000, past the VMM's OK line, and a reader."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sock.connect(vm.vsock)
    sock.sendall(b"CONNECT 5000\n")
    f = sock.makefile("rb")
    line = f.readline()
    if not line.startswith(b"OK "):
        fail(f"CONNECT 5000 answered {line!r}")
    return sock, f


def bad_commands(vm):
    """What the guest answers to lines that are not commands, each on one connection; a line
    longer than its limit and data while it sends each end that connection only."""
    sock, f = guest_conn(vm)
    with sock:
        for cmd, want in ((b"HELLO", b"ERROR unknown command"), (b"SEND 10", b"ERROR bad arguments"),
                          (b"RECV 1x", b"ERROR bad arguments"),
                          (b"ECHO 99999999999999999999", b"ERROR bad arguments"),
                          (b"RECV 0", b"RECVD 0 "), (b"ECHO 0", b"ECHOED 0 "),
                          (b"SEND 0 5", b"SENT 0 ")):
            sock.sendall(cmd + b"\n")
            line = f.readline().rstrip(b"\n")
            if not line.startswith(want):
                fail(f"{cmd!r} answered {line!r}, want {want!r}")
    for what, data in (("a line of 100 bytes", b"R" * 100 + b"\n"),
                       ("data while the guest sends", b"SEND 100000000 1\nxyz")):
        sock, f = guest_conn(vm)
        with sock:
            sock.sendall(data)
            try:
                while f.read(65536):
                    pass
            except ConnectionResetError:
                pass
            except socket.timeout:
                fail(f"{what}: the guest did not end the connection in 20 s")
    vm.warns_expected |= {"soak: warn command line too long: reset port 0x",
                          "soak: warn data while we send: reset port 0x"}
    print("ok: bad commands answered with ERROR, a long line and data while sending reset")


def one(vmm, payload, driver, args, root, jail):
    vm = Vm(vmm, payload, root, "vm", 3600, jail)
    try:
        wait_up([vm], 30)
        bad_commands(vm)
        t0 = time.monotonic()
        run = subprocess.run([driver, "--socket", vm.vsock] + args, capture_output=True,
                             text=True)
        sys.stdout.write(run.stdout)
        sys.stdout.write(run.stderr)
        if run.returncode != 0:
            fail(f"vsock-soak exited {run.returncode} after {time.monotonic() - t0:.1f} s; "
                 f"console: {vm.text('console.log')[-500:]}")
        summary(run.stdout, "vsock-soak")
    finally:
        vm.stop()
        try:
            vm.proc.wait(30)
        except subprocess.TimeoutExpired:
            vm.proc.kill()
            vm.proc.wait()
    vm.check_clean_exit()
    print("ok: soak passed, the VMM exited 7")


def many(vmm, payload, driver, n, seconds, root):
    if os.environ.get("DEVHOST"):
        # In the emulated host (tests/integration/route.sh) every guest's vCPU spins on the one
        # pinned CPU of L1, emulated: with 100 a guest got no echo through in 10 s. 40 guests
        # for 20 s there: the same checks, as many at once as that CPU serves.
        n, seconds = min(n, 40), max(seconds, 20)
    fds_before = fds()
    t0 = time.monotonic()
    vms = [Vm(vmm, payload, root, f"vm{i:03d}", 600) for i in range(n)]
    drivers = []
    try:
        wait_up(vms, 100)
        print(f"{n} guests up in {time.monotonic() - t0:.1f} s", flush=True)
        # Spawning 100 drivers among 100 spinning vCPUs takes seconds: each connects, says
        # it is ready and waits for EOF on the pipe, so that all start exchanging at once.
        t1 = time.monotonic()
        go_r, go_w = os.pipe()
        for vm in vms:
            out = open(os.path.join(vm.dir, "driver.out"), "w+")
            drivers.append((out, subprocess.Popen(
                [driver, "--socket", vm.vsock, "--seconds", str(seconds), "--conns", "2",
                 "--cmd-mib", "1", "--cmds", "3", "--stall", "60", "--go-stdin"],
                stdin=go_r, stdout=out, stderr=subprocess.STDOUT)))
        os.close(go_r)
        deadline = time.monotonic() + 100
        for vm, (out, proc) in zip(vms, drivers):
            while "vsock-soak: ready" not in vm.text("driver.out"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    os.close(go_w)
                    fail(f"{vm.dir}: the driver is not ready: {vm.text('driver.out')[-500:]}")
                time.sleep(0.05)
        os.close(go_w)
        print(f"{n} drivers connected in {time.monotonic() - t1:.1f} s, then started at once",
              flush=True)
        t1 = time.monotonic()
        total, least = 0, None
        drivers_end = time.monotonic() + seconds + 60
        for vm, (out, proc) in zip(vms, drivers):
            try:
                st = proc.wait(max(1, drivers_end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                fail(f"{vm.dir}: the driver did not end within {seconds + 60} s")
            out.seek(0)
            text = out.read()
            out.close()
            moved, send, recv, echo, failures = summary(text, vm.dir)
            # Each way at least once: SEND (guest to host), RECV (host to guest), ECHO (both).
            if st != 0 or failures or not (send and recv and echo):
                fail(f"{vm.dir}: the driver exited {st}, moved {moved} bytes: {text[-800:]}")
            total += moved
            least = moved if least is None else min(least, moved)
        print(f"{n} drivers passed in {time.monotonic() - t1:.1f} s: {total} bytes checked, "
              f"at least {least} by each ({total / 2**20 / seconds:.1f} MiB/s together)",
              flush=True)
    finally:
        for _, proc in drivers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        t_stop = time.monotonic()
        for vm in vms:
            vm.stop()
        for vm in vms:  # on a failure too: no VMM outlives the test
            try:
                vm.proc.wait(30)
            except subprocess.TimeoutExpired:
                vm.proc.kill()
                vm.proc.wait()
    t2 = time.monotonic()
    for vm in vms:
        vm.check_clean_exit()
    print(f"{n} VMMs stopped in {t2 - t_stop:.1f} s", flush=True)
    left = vmm_processes(vmm, root)
    if left:
        fail(f"VMM processes left after all exited: {left}")
    for vm in vms:
        extra = sorted(set(os.listdir(vm.dir)) - {"console.log", "vmm.err", "driver.out"})
        if extra:
            fail(f"{vm.dir}: left behind: {extra}")
        shutil.rmtree(vm.dir)
    if os.listdir(root):
        fail(f"{root}: left behind: {os.listdir(root)}")
    socks = unix_sockets_under(root)
    if socks:
        fail(f"unix sockets still bound under {root}: {socks[:5]}")
    if fds() != fds_before:
        fail(f"this process's fds {fds()} are not those before the run {fds_before}")
    print(f"ok: {n} sandboxes exchanged data for {seconds} s, all exited 7, nothing left "
          f"(processes, files, sockets, fds)")


def on_sigterm(signum, frame):
    """meson's timeout: unwind, so that the finally clauses stop every VMM and driver."""
    raise SystemExit(f"FAIL: stopped by signal {signum}")


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    if len(sys.argv) < 5 or sys.argv[4] not in ("one", "one-jailed", "many"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("SKIP: /dev/kvm is not usable here")
        sys.exit(77)
    vmm, payload, driver, mode = sys.argv[1:5]
    if mode == "one-jailed" and os.geteuid() != 0:
        print("SKIP: --jail needs root (it changes uid and makes namespaces)")
        sys.exit(77)
    root = tempfile.mkdtemp(prefix="vsock-soak-")
    try:
        if mode.startswith("one"):
            one(vmm, payload, driver, sys.argv[5:], root, mode == "one-jailed")
        else:
            if len(sys.argv) != 7:
                print(__doc__, file=sys.stderr)
                sys.exit(2)
            many(vmm, payload, driver, int(sys.argv[5]), int(sys.argv[6]), root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
