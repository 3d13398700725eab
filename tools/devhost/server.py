#!/usr/bin/env python3
"""The command server of a pooled emulated host (tools/devhost/pool): runs inside L1 as the
command of a long `tools/devhost/run --forward PORT`, and runs each test's command sent to it,
as `run` would have in an L1 of its own.

usage: server.py --port PORT [--idle SEC] [--boot N]

Each connection is one command: a request (argv, env, cwd, id), the tar of its --add paths
(unpacked at their absolute paths, removed afterwards), then its stdout and stderr streamed
back, the tar of what it wrote under $DEVHOST_OUT (/out/ID), and its exit status. Commands of
several connections run at once. The server exits 0 after --idle seconds without a command, or
once drained after a quit frame; L1 then powers off. A command's session (process group) is
killed when it ends, so a test's strays do not outlive it.
"""

import argparse
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

lock = threading.Lock()
active = 0
last_end = time.monotonic()
quitting = False


def log(msg):
    print("devhost-server: %s" % msg, file=sys.stderr, flush=True)


def safe_members(tar):
    """Members with absolute-free, non-climbing names (the host's client sends paths relative
    to /); links stay as they are: a test's trees keep their symlinks."""
    for m in tar:
        name = m.name.lstrip("/")
        if name.startswith("..") or "/../" in "/" + name + "/":
            raise wire.WireError("input tar member %r climbs out" % m.name)
        m.name = name
        yield m


def pump(stream, sock, kind, send_lock, ended):
    """Forward one of the command's streams until its end, or until 1 s after the command
    ended with nothing more: a daemon the command left behind (sandboxctl's VMMs and proxies
    call setsid) may hold the pipe open for ever, and the command's exit is what ends it, as
    it ends `tools/devhost/run`."""
    fd = stream.fileno()
    quiet_since = None
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                if ended.is_set():
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since >= 1.0:
                        break
                continue
            quiet_since = None
            data = os.read(fd, 65536)
            if not data:
                break
            with send_lock:
                wire.send(sock, kind, data)
    except OSError:
        pass


def serve_one(conn, boot):
    global active, last_end, quitting
    send_lock = threading.Lock()
    made = []
    proc = None
    out = None
    try:
        wire.send(conn, b"H", {"pid": os.getpid(), "boot": boot})
        kind, payload = wire.recv(conn)
        if kind == b"Q":
            quitting = True
            log("quit asked: exiting once idle")
            return
        if kind != b"R":
            raise wire.WireError("expected a request, got %r" % kind)
        req = wire.load(payload)
        argv, env, cwd, rid = req["argv"], req.get("env", {}), req.get("cwd", "/"), req["id"]
        if not argv or not all(isinstance(a, str) for a in argv) or "/" in rid or rid in ("", ".", ".."):
            raise wire.WireError("a malformed request")
        # The --add paths: unpacked where the host has them, removed at the end.
        adds = req.get("adds", [])
        if not all(isinstance(p, str) and p.startswith("/") and p != "/" for p in adds):
            raise wire.WireError("a malformed list of added paths")
        made = [p for p in adds if not os.path.lexists(p)]
        reader = wire.TarReader(conn, b"I")
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for m in safe_members(tar):
                tar.extract(m, "/", set_attrs=True)
        reader.drain()
        out = "/out/" + rid
        os.makedirs(out, exist_ok=True)
        full = dict(os.environ)
        full.update(env)
        full["DEVHOST_OUT"] = out
        full["DEVHOST_CWD"] = cwd
        try:
            proc = subprocess.Popen(argv, env=full, cwd=cwd if os.path.isdir(cwd) else "/",
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            with send_lock:
                wire.send(conn, b"E", ("devhost-server: cannot run %s: %s\n" % (argv[0], e)).encode())
                wire.send(conn, b"T", b"")
                wire.send(conn, b"X", {"status": 127})
            return
        ended = threading.Event()
        pumps = [threading.Thread(target=pump, args=(f, conn, k, send_lock, ended), daemon=True)
                 for f, k in ((proc.stdout, b"O"), (proc.stderr, b"E"))]
        for t in pumps:
            t.start()

        def control():  # kill frames from the host; the end of the stream kills too
            try:
                while True:
                    k, p = wire.recv(conn)
                    if k is None:
                        break
                    if k == b"K":
                        sig = int(wire.load(p).get("signal", signal.SIGKILL))
                        try:
                            os.killpg(proc.pid, sig)
                        except OSError:
                            pass
            except (OSError, wire.WireError, ValueError):
                pass
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass

        threading.Thread(target=control, daemon=True).start()
        status = proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # strays in the command's process group
        except OSError:
            pass
        ended.set()
        for t in pumps:
            t.join()
        proc.stdout.close()
        proc.stderr.close()
        status = status if status >= 0 else 128 - status
        with send_lock:
            w = wire.TarWriter(conn, b"T")
            with tarfile.open(fileobj=w, mode="w|") as tar:
                tar.add(out, arcname=".")
            w.close()
            wire.send(conn, b"X", {"status": status})
    except (OSError, wire.WireError, KeyError, TypeError, tarfile.TarError) as e:
        log("connection failed: %s" % e)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        conn.close()
        for p in made:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                _unlink(p)
        if out:
            shutil.rmtree(out, ignore_errors=True)
        with lock:
            active -= 1
            last_end = time.monotonic()


def _unlink(p):
    try:
        os.unlink(p)
    except OSError:
        pass


def main():
    global active
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--boot", type=int, default=0)
    a = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", a.port))
    s.listen(16)
    s.settimeout(1.0)
    print("devhost-server: listening on %d" % a.port, flush=True)
    while True:
        with lock:
            idle = time.monotonic() - last_end if active == 0 else -1
        if idle >= 0 and (quitting or idle >= a.idle):
            log("%s: exiting" % ("quit asked" if quitting else "idle for %d s" % a.idle))
            return 0
        try:
            conn, _ = s.accept()
        except socket.timeout:
            continue
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            active += 1
        threading.Thread(target=serve_one, args=(conn, a.boot), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
