#!/usr/bin/env python3
# The VMM's control socket (wire/api_proto.h) against a real VM running payload-spin on two
# vCPUs: STATUS, PAUSE (the vCPUs stop using CPU), RESUME (they use it again), an unknown type
# (-EOPNOTSUPP), garbage (the connection is closed, the VMM goes on), SHUTDOWN (exit status 0,
# the socket is removed).
#
# usage: api.py VMM PAYLOAD_SPIN
import os, socket, struct, subprocess, sys, tempfile, time

MAGIC, VERSION, REPLY = 0x41584253, 1, 0x8000
STATUS, PAUSE, RESUME, SHUTDOWN = 1, 2, 3, 4
EOPNOTSUPP = 95


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def call(sock, typ, ident):
    sock.sendall(struct.pack("<IHHII", MAGIC, VERSION, typ, ident, 0))
    hdr = recv_exact(sock, 16)
    magic, version, rtype, rid, length = struct.unpack("<IHHII", hdr)
    if magic != MAGIC or version != VERSION or rtype != typ | REPLY or rid != ident:
        fail(f"bad reply header to type {typ}: {hdr.hex()}")
    payload = recv_exact(sock, length)
    (error,) = struct.unpack_from("<i", payload)
    return error, payload[8:]


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            fail("the VMM closed the connection")
        buf += chunk
    return buf


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def main():
    vmm, payload = sys.argv[1], sys.argv[2]
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("SKIP: /dev/kvm is not usable here")
        sys.exit(77)
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "api.sock")
    vm = subprocess.Popen([vmm, "--payload", payload, "--cpus", "2", "--timeout", "60",
                           "--api", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if os.path.exists(path):
                break
            time.sleep(0.02)
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(10)
        sock.connect(path)
        error, body = call(sock, STATUS, 1)
        state, ncpus = struct.unpack_from("<II", body)
        if error or state != 1 or ncpus != 2:
            fail(f"STATUS: error {error}, state {state}, cpus {ncpus}")
        time.sleep(0.3)
        if call(sock, PAUSE, 2)[0]:
            fail("PAUSE refused")
        if struct.unpack_from("<I", call(sock, STATUS, 3)[1])[0] != 2:
            fail("STATUS does not say paused")
        t0 = cpu_ticks(vm.pid)
        time.sleep(1)
        paused = cpu_ticks(vm.pid) - t0
        if paused > 10:
            fail(f"paused, the VMM still used {paused} ticks in 1 s")
        if call(sock, RESUME, 4)[0]:
            fail("RESUME refused")
        t0 = cpu_ticks(vm.pid)
        time.sleep(1)
        running = cpu_ticks(vm.pid) - t0
        if running < 50:
            fail(f"resumed, the spinning vCPUs used only {running} ticks in 1 s")
        print(f"ok: pause/resume: {paused} ticks in 1 s paused, {running} running")
        if call(sock, 0x7777, 5)[0] != -EOPNOTSUPP:
            fail("an unknown type was not answered -EOPNOTSUPP")
        bad = socket.socket(socket.AF_UNIX)
        bad.settimeout(10)
        bad.connect(path)
        bad.sendall(b"GET / HTTP/1.0\r\n\r\n")
        if bad.recv(100) != b"":
            fail("garbage did not close the connection")
        if call(sock, SHUTDOWN, 6)[0]:
            fail("SHUTDOWN refused")
        status = vm.wait(timeout=20)
        if status != 0:
            fail(f"exit status {status} after SHUTDOWN: {vm.stderr.read().decode()}")
        if os.path.exists(path):
            fail("the socket is still there after the VMM exited")
        print("ok: status, pause, resume, unknown type, garbage, shutdown")
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


main()
