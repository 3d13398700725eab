# SPDX-License-Identifier: Apache-2.0
"""Remote mode's command sessions (sandbox_sdk/_remote_exec.py) against a scripted dataplane
on loopback: a socket dropped mid-stream reattaches from the offsets received (a replay that
overlaps is not repeated, in the result or the callbacks), a close before `started` re-issues
the same execute, a 1001 reattaches at once, kill sends its frame and takes the exit, a service
that never sends the exit after a kill is given up on (bounded), and input waits for
`started`. Native, no sandbox."""

import json
import socket
import threading
import time

import pytest

from sandbox_sdk._remote import RemoteCommandHandle
from sandbox_sdk._remote_exec import RECONNECT_TRIES, RemoteCall, execute_frame
from sandbox_sdk._ws import WebSocket
from sandbox_sdk.errors import CommandExitError, ConnectionLostError

from test_ws import frame, read_frame, upgrade  # the scripted server's framing


def text(obj):
    return frame(1, json.dumps(obj).encode())


def close(code):
    return frame(8, code.to_bytes(2, "big"))


class Dataplane:
    """Accepts clients one after the other; the n-th connection runs scripts[n](conn, first),
    `first` being the client's first frame (decoded). Records every frame clients sent."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.firsts, self.frames = [], []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        for script in self.scripts:
            c, _ = self.sock.accept()
            c.settimeout(10)
            upgrade(c)
            first = json.loads(read_frame(c)[1])
            self.firsts.append(first)
            try:
                script(c, first, self)
            except (OSError, EOFError):
                pass
            c.close()

    def next_frame(self, c):
        while True:
            op, data = read_frame(c)
            if op == 1:
                m = json.loads(data)
                self.frames.append(m)
                return m
            if op == 8:
                raise EOFError


class FakeBox:
    """What a RemoteCall asks of its sandbox: a WebSocket to the dataplane."""

    def __init__(self, port):
        self.port = port

    def _ws_connect(self):
        return WebSocket.connect("ws://127.0.0.1:%d/dp/x/execute/ws" % self.port, {}, 10)

    def _ws_refused(self, e):
        return e


def start(dp, cmd="job", on_stdout=None):
    call = RemoteCall(FakeBox(dp.port), None, cmd, on_stdout, None, 1 << 20, "cid-1")
    call._frame = execute_frame(cmd, None, None, None, None, False, True, "cid-1")
    threading.Thread(target=call.run, daemon=True).start()
    return call


def test_drop_mid_stream_reattaches_from_the_offsets():
    def one(c, first, dp):
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 7}) +
                  text({"type": "stdout", "data": "a\n", "offset": 0}))
        time.sleep(0.2)
        c.shutdown(socket.SHUT_RDWR)  # dropped, no close frame

    def two(c, first, dp):
        assert first == {"type": "reconnect", "command_id": "cid-1", "stdout_offset": 2,
                         "stderr_offset": 0}
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 7}) +
                  text({"type": "stdout", "data": "a\nb\n", "offset": 0}) +  # overlaps
                  text({"type": "stdout", "data": "é\n", "offset": 4}) +
                  text({"type": "stderr", "data": "e", "offset": 0}) +
                  text({"type": "exit", "exit_code": 0}) + close(1000))
    dp = Dataplane([one, two])
    chunks = []
    call = start(dp, on_stdout=chunks.append)
    assert call.wait(20)
    r = call.result(True)
    assert (r.stdout, r.stderr, r.exit_code) == ("a\nb\né\n", "e", 0)
    assert "".join(chunks) == "a\nb\né\n"
    assert dp.firsts[0]["type"] == "execute" and dp.firsts[0]["command_id"] == "cid-1"


def test_close_before_started_reissues_the_execute_and_1001_is_at_once():
    def one(c, first, dp):
        c.sendall(close(1000))  # an early close: the same execute again

    def two(c, first, dp):
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 9}) + close(1001))

    def three(c, first, dp):
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 9}) +
                  text({"type": "exit", "exit_code": 5}) + close(1000))
    dp = Dataplane([one, two, three])
    t0 = time.monotonic()
    call = start(dp)
    assert call.wait(20)
    with pytest.raises(CommandExitError) as e:
        call.result(True)
    assert e.value.exit_code == 5
    assert [f["type"] for f in dp.firsts] == ["execute", "execute", "reconnect"]
    assert dp.firsts[1]["command_id"] == "cid-1"
    assert time.monotonic() - t0 < 2.0, "a 1001 reattaches without the backoff"


def test_kill_and_input_after_started():
    def one(c, first, dp):
        time.sleep(0.3)  # input sent before `started` would be lost: none may come yet
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 3}))
        while True:
            m = dp.next_frame(c)
            if m["type"] == "kill":
                c.sendall(text({"type": "exit", "exit_code": 137}) + close(1000))
                return
    dp = Dataplane([one])
    call = start(dp)
    assert call.wait_started(10) and call.pid == 3
    call.send_input("hi\n")
    h = RemoteCommandHandle(call, True)
    assert h.kill()
    with pytest.raises(CommandExitError) as e:
        h.wait(10)
    assert e.value.exit_code == 137 and e.value.result.signal == 9
    assert [m["type"] for m in dp.frames] == ["input", "kill"]
    assert not h.kill()


def test_no_exit_after_kill_is_given_up():
    def stubborn(c, first, dp):
        c.sendall(text({"type": "started", "command_id": "cid-1", "pid": 3}))
        dp.next_frame(c)  # the kill, ignored
        c.sendall(close(1001))
    dp = Dataplane([stubborn] * (RECONNECT_TRIES + 2))
    call = start(dp)
    assert call.wait_started(10)
    call._killed = True
    call.send({"type": "kill"})
    assert call.wait(30), "reattaching after a kill is bounded"
    with pytest.raises(ConnectionLostError):
        call.result(False)
    assert len(dp.firsts) == RECONNECT_TRIES + 1
