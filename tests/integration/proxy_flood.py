#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/integration/proxy_flood.py: the two ends of proxy_flood.sh.

  proxy_flood.py upstream ADDR PORT COUNTFILE
      An HTTP/1.1 server (keep-alive, a thread a connection, at most 1000) that writes the
      number of connections it accepted so far into COUNTFILE at each one.
  proxy_flood.py silent ADDR PORT N HOST
      N connections that never send a byte, then one normal request (GET / with Host HOST,
      timed), then waits for the proxy to close the N (up to 40 s). Prints "key value"
      lines: opened, normal_ms, normal_status, closed, max_close_s.
  proxy_flood.py relays ADDR PORT N HOST HOLD
      N plain-HTTP connections at once, each sends one request and reads its answer, then
      holds the connection open HOLD seconds (a slow client: its relay stays up). Prints
      answered, refused (closed without an answer), and after HOLD the status of one more.
  proxy_flood.py dribble ADDR PORT N HOST
      N connections at once, each sending a request head of 2 KiB a byte a write (1 ms
      apart, TCP_NODELAY); a normal request amid them. Prints refused (closed or reset before
      the head was sent), answered, normal_ms, normal_status.
  proxy_flood.py refusals AUDITLOG FROM
      The connections' refusals in AUDITLOG from line FROM (0-based) on: "deny N" (deny lines
      of tcp and http, and what the summary lines counted of them), "error N" (error lines).

Every wait is bounded; only the addresses given are ever dialed.
"""
import os
import resource
import select
import socket
import sys
import threading
import time


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(max(soft, n), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def request(addr, port, host, timeout):
    """One GET on a new connection: (status line or '', ms)."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection((addr, port), timeout=timeout)
    except OSError:
        return "", (time.monotonic() - t0) * 1000
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host.encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        data = b""
    finally:
        s.close()
    return data.split(b"\r\n", 1)[0].decode(errors="replace"), (time.monotonic() - t0) * 1000


def upstream(addr, port, countfile):
    lock = threading.Lock()
    count = [0]
    live = threading.BoundedSemaphore(1000)

    def serve(c):
        try:
            c.settimeout(120)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                    if len(buf) > 65536:
                        return
                buf = buf.split(b"\r\n\r\n", 1)[1]
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except OSError:
            pass
        finally:
            c.close()
            live.release()

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1024)
    with open(countfile, "w") as f:
        f.write("0\n")
    while True:
        c, _ = ls.accept()
        with lock:
            count[0] += 1
            with open(countfile + ".tmp", "w") as f:
                f.write("%d\n" % count[0])
            os.replace(countfile + ".tmp", countfile)
        if not live.acquire(timeout=5):
            c.close()
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def silent(addr, port, n, host):
    raise_nofile(n + 64)
    socks, opened = [], {}
    t0 = time.monotonic()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((addr, port))
        socks.append(s)
        opened[s.fileno()] = time.monotonic()
    print("opened %d in %.2f s" % (n, time.monotonic() - t0), file=sys.stderr)
    # The flood is there (its last ones maybe still in the listen queue): a normal request.
    status, ms = request(addr, port, host, 5)
    print("normal_ms %d" % ms)
    print("normal_status %s" % (status.replace(" ", "_") or "none"))
    sys.stdout.flush()
    poller = select.poll()
    byfd = {}
    for s in socks:
        poller.register(s.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        byfd[s.fileno()] = s
    closed, max_close = 0, 0.0
    end = t0 + 40
    while byfd and time.monotonic() < end:
        for fd, ev in poller.poll(500):
            s = byfd.get(fd)
            if s is None:
                continue
            try:
                data = s.recv(1)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                continue  # the proxy never speaks first on a web port; not a close
            max_close = max(max_close, time.monotonic() - opened[fd])
            closed += 1
            poller.unregister(fd)
            del byfd[fd]
            s.close()
    print("opened %d" % n)
    print("closed %d" % closed)
    print("max_close_s %.1f" % max_close)
    for s in byfd.values():
        s.close()


def relays(addr, port, n, host, hold):
    raise_nofile(n + 64)
    answered, refused = [0], [0]
    lock = threading.Lock()
    start = threading.Barrier(n)

    def one():
        try:
            start.wait(10)
        except threading.BrokenBarrierError:
            pass
        ok = False
        s = None
        try:
            s = socket.create_connection((addr, port), timeout=15)
            s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
            data = b""
            while b"ok\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            ok = data.startswith(b"HTTP/1.1 200")
            if ok:
                time.sleep(hold)  # keep-alive, held open: the relay's two threads stay
        except OSError:
            pass
        finally:
            with lock:
                (answered if ok else refused)[0] += 1
            if s:
                s.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(hold + 60)
    print("answered %d" % answered[0])
    print("refused %d" % refused[0])
    status, ms = request(addr, port, host, 5)
    print("after_status %s" % (status.replace(" ", "_") or "none"))
    print("after_ms %d" % ms)


def dribble(addr, port, n, host):
    raise_nofile(n + 64)
    counts = {"refused": 0, "answered": 0}
    lock = threading.Lock()
    head = b"GET / HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n" % (host.encode(), b"a" * 2048)

    def one():
        what = "refused"
        s = None
        try:
            s = socket.create_connection((addr, port), timeout=15)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(len(head)):
                s.send(head[i : i + 1])
                time.sleep(0.001)
            if s.recv(64).startswith(b"HTTP/1.1 200"):
                what = "answered"
        except OSError:
            pass
        finally:
            with lock:
                counts[what] += 1
            if s:
                s.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    status, ms = request(addr, port, host, 5)
    for t in threads:
        t.join(60)
    print("refused %d" % counts["refused"])
    print("answered %d" % counts["answered"])
    print("normal_ms %d" % ms)
    print("normal_status %s" % (status.replace(" ", "_") or "none"))


def refusals(path, start):
    import json

    deny = error = 0
    with open(path, errors="replace") as f:
        for i, line in enumerate(f):
            if i < start:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("decision") == "summary":
                for k in ev.get("kinds", []):
                    if k.get("proto") in ("tcp", "http") and k.get("decision") == "deny":
                        deny += int(k.get("count", 0))
                deny += int(ev.get("other", 0))
            elif ev.get("proto") in ("tcp", "http"):
                if ev.get("decision") == "deny":
                    deny += 1
                elif ev.get("decision") == "error":
                    error += 1
    print("deny %d" % deny)
    print("error %d" % error)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "upstream" and len(a) == 3:
        upstream(a[0], int(a[1]), a[2])
    elif cmd == "silent" and len(a) == 4:
        silent(a[0], int(a[1]), int(a[2]), a[3])
    elif cmd == "relays" and len(a) == 5:
        relays(a[0], int(a[1]), int(a[2]), a[3], float(a[4]))
    elif cmd == "dribble" and len(a) == 4:
        dribble(a[0], int(a[1]), int(a[2]), a[3])
    elif cmd == "refusals" and len(a) == 2:
        refusals(a[0], int(a[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
