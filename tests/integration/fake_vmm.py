#!/usr/bin/env python3
# A stand-in for sandbox-vmm and its guest's agent, hostile on request: sandboxctl starts it
# (SANDBOX_VMM) as it starts the VMM, and it serves api.sock (wire/api_proto.h: STATUS,
# SHUTDOWN) and vsock.sock (CONNECT 52, then wire/proto.h frames) as a guest agent would,
# except where the test wants a guest that misbehaves. No KVM and no Linux guest: the host
# side's defences are tested natively, in milliseconds.
#
# The guest it pretends to be (paths and commands the tests use):
#   STAT/FILE_READ /exact     says 100000 bytes and sends them
#   STAT/FILE_READ /oversize  says 100000 bytes, sends DATA for ever
#   STAT/FILE_READ /trickle   says 10 MiB, sends 1 byte a second
#   FILE_WRITE /hostile...    reads nothing after the first frame and sends frames of other
#                             ids unasked, for ever (a cp in that must end at its deadline)
#   FILE_WRITE elsewhere, MKDIR  OK (create puts the proxy's CA in the guest so)
#   STAT/FILE_READ elsewhere  ERROR ENOENT, its message with a terminal escape in it
#   EXEC ignore ...           (or sh -c '... ignore ...') STARTED, then never EXIT: SIGNALs
#                             are answered OK and noted in $FAKE_VMM_LOG, as "signal N"
#   EXEC anything else        its words on STDOUT, then EXIT 0
# With FAKE_VMM_MUTE=1 the guest never gets as far as its agent: no announcement, no answer.
# Its own command line goes to $FAKE_VMM_LOG ("argv ..."), and how it ended ("exit N").
# --timeout SEC ends it with status 6, EOF on --lifeline FD with status 7, as the VMM does.
import os, select, signal, socket, struct, sys, threading, time

MAGIC, API_VERSION, REPLY = 0x41584253, 1, 0x8000
HELLO, PING, PONG, EXEC, STARTED, STDOUT, EXIT = 1, 2, 3, 4, 5, 6, 8
SIGNAL, OK, ERROR, FILE_WRITE, FILE_READ, DATA, END, STAT, STAT_REPLY = (
    12, 13, 14, 15, 16, 17, 18, 19, 20)
MKDIR, SYNC = 23, 25
ENOENT_MSG = b"no such file \033]0;owned\007 here"
SIZES = {"/exact": 100000, "/oversize": 100000, "/trickle": 10 << 20}
t0 = time.monotonic()
log_lock = threading.Lock()


def log(line):
    path = os.environ.get("FAKE_VMM_LOG")
    if path:
        with log_lock, open(path, "a") as f:
            f.write(line + "\n")


def finish(status, why):
    print(f"fake-vmm: {why}", flush=True)
    log(f"exit {status}")
    os._exit(status)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def frame(typ, ident, payload=b""):
    return struct.pack("<IHHQ", len(payload), typ, 0, ident) + payload


def serve_api(conn):
    try:
        while True:
            magic, version, typ, ident, length = struct.unpack("<IHHII", recv_exact(conn, 16))
            recv_exact(conn, length)
            if typ == 1:  # STATUS: running
                body = struct.pack("<iI", 0, 0) + struct.pack(
                    "<IIQQII", 1, 1, 128, int((time.monotonic() - t0) * 1000), os.getpid(), 0)
            else:
                body = struct.pack("<iI", 0 if typ == 4 else -95, 0)
            conn.sendall(struct.pack("<IHHII", MAGIC, API_VERSION, typ | REPLY, ident,
                                     len(body)) + body)
            if typ == 4:  # SHUTDOWN
                finish(0, "shut down through the API")
    except (EOFError, OSError):
        conn.close()


def stream(conn, typ, ident, data):
    conn.sendall(frame(typ, ident, data))


def serve_agent(conn):
    writes = set()  # ids of the FILE_WRITEs going on
    line = b""
    while not line.endswith(b"\n"):
        line += recv_exact(conn, 1)
    conn.sendall(b"OK 1024\n")
    try:
        while True:
            length, typ, _, ident = struct.unpack("<IHHQ", recv_exact(conn, 16))
            payload = recv_exact(conn, length)
            agent_frame(conn, typ, ident, payload, writes)
    except (EOFError, OSError):
        conn.close()


def enoent(conn, ident):
    conn.sendall(frame(ERROR, ident, struct.pack("<II", 2, 0) + ENOENT_MSG))


def agent_frame(conn, typ, ident, payload, writes):
    if typ == HELLO:
        conn.sendall(frame(HELLO, 0, struct.pack("<II", 2, 1 << 20)))
    elif typ == PING:
        conn.sendall(frame(PONG, ident, struct.pack("<Q", 1000)))
    elif typ in (SYNC, MKDIR):
        conn.sendall(frame(OK, ident))
    elif typ == STAT:
        path = payload.rstrip(b"\0").decode()
        if path not in SIZES:
            enoent(conn, ident)
            return
        conn.sendall(frame(STAT_REPLY, ident,
                           struct.pack("<QqIIII", SIZES[path], 0, 0, 0o100644, 0, 0)))
    elif typ == FILE_READ:
        path = payload.rstrip(b"\0").decode()
        if path == "/exact":
            stream(conn, DATA, ident, b"x" * SIZES[path])
            conn.sendall(frame(END, ident))
        elif path == "/oversize":
            while True:
                stream(conn, DATA, ident, b"y" * 65536)
        elif path == "/trickle":
            while True:
                stream(conn, DATA, ident, b"z")
                time.sleep(1)
        else:
            enoent(conn, ident)
    elif typ == FILE_WRITE:
        if not payload[16:].startswith(b"/hostile"):
            writes.add(ident)
            return
        # Never read again; flood the host with frames it did not ask for.
        while True:
            conn.sendall(frame(PONG, 999, struct.pack("<Q", 0)) * 256)
    elif typ == END and ident in writes:
        writes.discard(ident)
        conn.sendall(frame(OK, ident))
    elif typ == EXEC:
        argc, envc = struct.unpack_from("<HH", payload, 20)
        words = payload[24:].split(b"\0")[1:1 + argc]
        conn.sendall(frame(STARTED, ident, struct.pack("<II", 42, 0)))
        if any(b"ignore" in w for w in words):
            return  # never EXIT
        conn.sendall(frame(STDOUT, ident, b" ".join(words) + b"\n"))
        conn.sendall(frame(EXIT, ident, struct.pack("<IIII", 0, 0, 0, 0)))
    elif typ == SIGNAL:
        target, sig = struct.unpack_from("<QI", payload)
        log(f"signal {sig}")
        try:  # the host may be gone already: what it sent before it went is still read
            conn.sendall(frame(OK, ident))
        except OSError:
            pass


def listen(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    return s


def main():
    signal.signal(signal.SIGTERM, lambda *_: finish(7, "stopped by signal 15"))
    args = sys.argv[1:]
    log("argv " + " ".join(args))
    opt = {}
    for i, a in enumerate(args):
        if a.startswith("--") and i + 1 < len(args):
            opt.setdefault(a, args[i + 1])
    api, vsock = listen(opt["--api"]), listen(opt["--vsock"])
    timeout = int(opt.get("--timeout", "0"))
    lifeline = int(opt.get("--lifeline", "-1"))
    ready = opt["--vsock"] + "_53"
    mute = os.environ.get("FAKE_VMM_MUTE") == "1"
    if os.environ.get("FAKE_VMM_SAY"):  # a line on the console (its stdout: console.log)
        print(os.environ["FAKE_VMM_SAY"], flush=True)
    if os.path.exists(ready) and not mute:  # the guest announces its agent (unread, maybe)
        r = socket.socket(socket.AF_UNIX)
        try:
            r.connect(ready)
            r.sendall(b"READY\n")
        except OSError:
            pass
        r.close()
    watch = [api] + ([] if mute else [vsock]) + ([lifeline] if lifeline >= 0 else [])
    while True:
        left = None if not timeout else max(0, t0 + timeout - time.monotonic())
        ready_fds, _, _ = select.select(watch, [], [], left)
        if timeout and time.monotonic() >= t0 + timeout:
            finish(6, f"guest still running after {timeout} s: stopped")
        for fd in ready_fds:
            if fd == lifeline:
                if not os.read(lifeline, 256):
                    finish(7, f"the creator went away (EOF on --lifeline {lifeline}): stopped")
            else:
                conn, _ = fd.accept()
                target = serve_api if fd is api else serve_agent
                threading.Thread(target=target, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
