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
# SNAPSHOT (not LIVE), while the file fake.snap exists beside $FAKE_VMM_LOG: writes state.fdt
# (a marker holding the RAM's size), a sparse `memory` with one page of data, its page digest
# in the reply (API version 2; a version 1 client gets the old reply), and the new top layer
# ($FAKE_VMM_SANDBOX_DISK create-overlay); with fake.hold there too it keeps a writable fd to
# `memory` after its reply, as a compromised VMM would. Restored (--restore DIR), it reads the
# state from --restore-state-fd (else DIR/state.fdt) and logs "state SHA256" of what it read;
# with fake.swap there, it first replaces DIR/state.fdt on disk (after sandboxctl's check).
# Its own command line goes to $FAKE_VMM_LOG ("argv ..."), and how it ended ("exit N").
# --timeout SEC ends it with status 6, EOF on --lifeline FD with status 7, as the VMM does.
import array, hashlib, os, select, signal, socket, struct, subprocess, sys, threading, time

MAGIC, REPLY = 0x41584253, 0x8000  # replies carry the request's API version
HELLO, PING, PONG, EXEC, STARTED, STDOUT, EXIT = 1, 2, 3, 4, 5, 6, 8
SIGNAL, OK, ERROR, FILE_WRITE, FILE_READ, DATA, END, STAT, STAT_REPLY = (
    12, 13, 14, 15, 16, 17, 18, 19, 20)
MKDIR, SYNC, RESEED, SET_CLOCK = 23, 25, 26, 28
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


def control(name):
    """Whether the test's control file `name` exists beside $FAKE_VMM_LOG."""
    path = os.environ.get("FAKE_VMM_LOG")
    return bool(path) and os.path.exists(os.path.join(os.path.dirname(path), name))


def recv_api(sock, n, fds):
    """n bytes of the API socket; fds passed with them (SCM_RIGHTS) are added to fds."""
    buf = b""
    while len(buf) < n:
        chunk, anc, _, _ = sock.recvmsg(n - len(buf), socket.CMSG_SPACE(4 * 4))
        if not chunk:
            raise EOFError
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(data[:len(data) - len(data) % 4])
                fds.extend(a)
        buf += chunk
    return buf


def page_digest(path, size):
    """wire/api_proto.h's page digest of a file: offset and bytes of each non-zero page."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for off in range(0, size, 4096):
            page = f.read(4096)
            if page.strip(b"\0"):
                h.update(struct.pack("<Q", off) + page)
    return h.digest()


held = []  # fds a hostile VMM keeps


def snapshot(payload, fds, version):
    """SNAPSHOT into the directory (its fd, passed): state, memory, the new top layer."""
    flags, nstrings = struct.unpack_from("<II", payload)
    strings = payload[8:].split(b"\0")[:nstrings]
    if not control("fake.snap") or flags & 2 or not fds:
        return -95, b""
    top = opt.get("--disk")
    ram = int(opt.get("--memory", "0")) << 20 or restored_ram
    dirfd = fds[0]
    state = b"FAKESTATE %d\n" % ram + os.urandom(64)
    fd = os.open("state.fdt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dirfd)
    os.write(fd, state)
    os.close(fd)
    fd = os.open("memory", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dirfd)
    os.ftruncate(fd, ram)
    os.pwrite(fd, b"fake guest RAM " + os.urandom(32), 8192)
    mem_path = f"/proc/self/fd/{fd}"
    digest = page_digest(mem_path, ram)
    if control("fake.hold"):
        held.append(fd)
    else:
        os.close(fd)
    if len(strings) > 1 and top:
        subprocess.run([os.environ["FAKE_VMM_SANDBOX_DISK"], "create-overlay",
                        strings[1].decode(), top], check=True)
        opt["--disk"] = strings[1].decode()
    res = struct.pack("<QQQQ", 1000, 2000, len(state), 4096)
    if version >= 2:
        res += digest
    return 0, res + b"\0"


def serve_api(conn):
    try:
        while True:
            fds = []
            magic, version, typ, ident, length = struct.unpack("<IHHII",
                                                               recv_api(conn, 16, fds))
            payload = recv_api(conn, length, fds)
            if typ == 1:  # STATUS: running
                body = struct.pack("<iI", 0, 0) + struct.pack(
                    "<IIQQII", 1, 1, 128, int((time.monotonic() - t0) * 1000), os.getpid(), 0)
            elif typ == 16:
                err, res = snapshot(payload, fds, version)
                body = struct.pack("<iI", err, 0) + res
            else:
                body = struct.pack("<iI", 0 if typ in (2, 3, 4) else -95, 0)
            for fd in fds:
                os.close(fd)
            conn.sendall(struct.pack("<IHHII", MAGIC, version, typ | REPLY, ident,
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
        conn.sendall(frame(HELLO, 0, struct.pack("<II", 4, 1 << 20)))  # PROTO_VERSION
    elif typ == PING:
        conn.sendall(frame(PONG, ident, struct.pack("<Q", 1000)))
    elif typ in (SYNC, MKDIR, RESEED, SET_CLOCK):
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


opt = {}
restored_ram = 0


def restore(directory):
    """Read the state as a restoring VMM does (after a swap on disk when asked to)."""
    global restored_ram
    if control("fake.swap"):
        swapped = os.path.join(directory, "state.fdt.swap")
        with open(swapped, "wb") as f:
            f.write(b"FAKESTATE 0\nswapped after the check" + b"!" * 64)
        os.rename(swapped, os.path.join(directory, "state.fdt"))
    if "--restore-state-fd" in opt:
        fd = int(opt["--restore-state-fd"])
        state = os.pread(fd, 1 << 20, 0)
        os.close(fd)
    else:
        with open(os.path.join(directory, "state.fdt"), "rb") as f:
            state = f.read()
    log("state " + hashlib.sha256(state).hexdigest())
    try:
        restored_ram = int(state.split(b"\n")[0].split()[1])
    except (IndexError, ValueError):
        finish(2, "not a state file")


def main():
    signal.signal(signal.SIGTERM, lambda *_: finish(7, "stopped by signal 15"))
    args = sys.argv[1:]
    log("argv " + " ".join(args))
    for i, a in enumerate(args):
        if a.startswith("--") and i + 1 < len(args):
            opt.setdefault(a, args[i + 1])
    if "--restore" in opt:
        restore(opt["--restore"])
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
