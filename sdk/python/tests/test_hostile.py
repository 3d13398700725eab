# SPDX-License-Identifier: Apache-2.0
"""The SDK against agents that misbehave, natively and in seconds (no KVM):

- a fake agent of our own on a unix socket, speaking the VMM's CONNECT and the agent's
  HELLO, then sending what a hostile guest could: a frame over the maximum, an unknown
  type, frames of ids nobody asked for, a CONNECT reply without end;
- tests/integration/fake_vmm.py through sandboxctl (SDK_FAKE_VMM names it): a file larger
  than its size said, an error message with a terminal escape, a command that never ends.
"""

import os
import shutil
import socket
import struct
import tempfile
import threading
import time

import pytest

from sandbox_sdk import (CommandTimeoutError, ConnectionLostError, Sandbox, SandboxError,
                         SandboxNotFoundError)
from sandbox_sdk import _calls, _conn, _wire as w


class FakeAgent:
    """Accepts one connection; `script(sock)` runs after the handshake."""

    def __init__(self, script, connect_reply=b"OK 1024\n"):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "vsock.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.script, self.connect_reply = script, connect_reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        s, _ = self.srv.accept()
        try:
            assert s.recv(64).startswith(b"CONNECT 52")
            s.sendall(self.connect_reply)
            s.recv(w.PROTO_HDR_LEN + 8)  # the client's HELLO
            s.sendall(w.frame(w.MSG_HELLO, 0, struct.pack("<II", w.PROTO_VERSION,
                                                           w.PROTO_MAX_PAYLOAD)))
            self.script(s)
        except OSError:
            pass
        finally:
            time.sleep(0.2)
            s.close()

    def close(self):
        self.srv.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def recv_frame(s):
    hdr = b""
    while len(hdr) < w.PROTO_HDR_LEN:
        hdr += s.recv(w.PROTO_HDR_LEN - len(hdr))
    length, msg_type, call_id = w.check_header(hdr)
    body = b""
    while len(body) < length:
        body += s.recv(length - len(body))
    return msg_type, call_id, body


def ping(conn):
    return conn.call(_calls.SimpleCall(w.MSG_PONG), w.MSG_PING, timeout=5)


def test_oversized_frame_drops_the_connection():
    def script(s):
        recv_frame(s)
        s.sendall(struct.pack("<IHHQ", w.PROTO_MAX_PAYLOAD + 1, w.MSG_PONG, 0, 1))
        s.sendall(b"x" * 4096)  # never buffered: the header alone is refused
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        t0 = time.monotonic()
        with pytest.raises(ConnectionLostError, match="frame of"):
            ping(conn)
        assert time.monotonic() - t0 < 3 and not conn.alive
    finally:
        fa.close()


@pytest.mark.parametrize("bad", [
    struct.pack("<IHHQ", 0, 999, 0, 1),           # unknown type
    struct.pack("<IHHQ", 0, w.MSG_PONG, 0, 1),    # shorter than PONG's minimum
    struct.pack("<IHHQ", 8, w.MSG_PONG, 1, 1) + bytes(8),  # non-zero flags
])
def test_malformed_frames_drop_the_connection(bad):
    fa = FakeAgent(lambda s: (recv_frame(s), s.sendall(bad)))
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        with pytest.raises(ConnectionLostError, match="broke the protocol"):
            ping(conn)
    finally:
        fa.close()


def test_frames_nobody_asked_for_are_dropped():
    def script(s):
        _, call_id, _ = recv_frame(s)
        for stray in range(call_id + 1, call_id + 200):  # ids of no call: ignored
            s.sendall(w.frame(w.MSG_STDOUT, stray, b"noise"))
        s.sendall(w.frame(w.MSG_PONG, call_id, struct.pack("<Q", 4242)))
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        assert ping(conn).reply[1] == struct.pack("<Q", 4242)
        conn.close()
    finally:
        fa.close()


def test_endless_connect_reply_is_refused():
    fa = FakeAgent(lambda s: None, connect_reply=b"O" * 4096)
    try:
        with pytest.raises(ConnectionLostError, match="refused CONNECT|answered CONNECT"):
            _conn.AgentConnection(fa.path, timeout=5)
    finally:
        fa.close()


def test_output_kept_is_capped():
    def script(s):
        _, call_id, _ = recv_frame(s)
        for _ in range(64):
            s.sendall(w.frame(w.MSG_STDOUT, call_id, b"y" * 65536))
        s.sendall(w.frame(w.MSG_EXIT, call_id, bytes(16)))
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        seen = []
        call = _calls.ExecCall("flood", lambda t: seen.append(len(t)), None, 1 << 20)
        conn.start(call, w.MSG_EXEC, w.exec_payload(["flood"], []))
        assert conn.wait(call, 10)
        r = call.result(check=True)
        assert len(r.stdout_bytes) == 1 << 20 and r.truncated and sum(seen) == 64 << 16
    finally:
        fa.close()


def test_unknown_and_invalid_sandboxes():
    for ref in ("nosuchsandbox", "../../etc", "", "a" * 200):
        with pytest.raises(SandboxNotFoundError):
            Sandbox.connect(ref)


# ---- fake_vmm.py through sandboxctl ----

@pytest.fixture(scope="module")
def fake_home():
    fake = os.environ.get("SDK_FAKE_VMM")
    if not fake or not os.environ.get("SANDBOXCTL"):
        pytest.skip("SDK_FAKE_VMM and SANDBOXCTL unset (the sdk-python-hostile test sets them)")
    home = tempfile.mkdtemp()
    os.makedirs(os.path.join(home, "images", "fake"))
    for name, size in (("kernel", 1), ("initrd", 1), ("rootfs", 16 << 20)):
        with open(os.path.join(home, "images", "fake", name), "wb") as f:
            f.truncate(size)
    saved = dict(os.environ)
    os.environ.update(SANDBOX_HOME=home, SANDBOX_VMM=fake, SANDBOX_SKIP_HOST_CHECK="1",
                      FAKE_VMM_LOG=os.path.join(home, "fake.log"))
    try:
        yield home
    finally:
        for sid in os.listdir(os.path.join(home, "sandboxes")):
            if not sid.startswith("."):
                Sandbox.connect(sid).kill()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def fsb(fake_home):
    with Sandbox.create(image="fake", network="none", memory=128, timeout=30) as s:
        yield s


def test_file_larger_than_its_size_is_stopped(fsb):
    assert len(fsb.files.read("/exact")) == 100000
    bg = fsb.run(["ignore"], background=True)  # on the sandbox's own connection
    t0 = time.monotonic()
    with pytest.raises(SandboxError, match="more than the 100000 bytes its size said"):
        fsb.files.read("/oversize")
    assert time.monotonic() - t0 < 10
    # the read had a connection of its own: the one the background command runs on lives
    assert not bg.done and bg.kill()
    assert fsb.run(["echo", "next", "call"]).stdout == "echo next call\n"


def test_guest_messages_are_made_printable(fsb):
    with pytest.raises(FileNotFoundError) as e:
        fsb.files.read("/elsewhere")
    assert "\033" not in str(e.value) and "\007" not in str(e.value)
    assert "no such file ?]0;owned? here" in str(e.value)


def test_command_the_guest_never_ends(fsb, fake_home, monkeypatch):
    monkeypatch.setattr(_calls, "TIMEOUT_GRACE", 1.0)
    t0 = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        fsb.run(["ignore"], timeout=0.5)
    assert time.monotonic() - t0 < 10
    h = fsb.run(["ignore"], background=True)
    assert h.kill(15)
    with open(os.path.join(fake_home, "fake.log")) as f:
        log = f.read().splitlines()
    assert "signal 9" in log and "signal 15" in log, log


def test_a_call_ended_by_another_calls_frame_is_refused():
    def script(s):
        _, call_id, _ = recv_frame(s)
        s.sendall(w.frame(w.MSG_OK, call_id))  # a STAT answered by OK
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        with pytest.raises(SandboxError, match="ended a call with frame type"):
            conn.call(_calls.SimpleCall(w.MSG_STAT_REPLY), w.MSG_STAT, w.path_payload("/x"), 5)
        assert not conn.alive
    finally:
        fa.close()


@pytest.mark.parametrize("name", [b"../../etc/cron.d/x", b"a/b", b"", b".", b"..", b"x" * 256])
def test_listing_names_that_could_climb_out_are_refused(name):
    def script(s):
        _, call_id, _ = recv_frame(s)
        s.sendall(w.frame(w.MSG_DIRENT, call_id, bytes(32) + b"fine"))
        s.sendall(w.frame(w.MSG_DIRENT, call_id, bytes(32) + name))
        s.sendall(w.frame(w.MSG_END, call_id))
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        with pytest.raises(SandboxError, match="listed an entry named"):
            conn.call(_calls.ListCall("/d"), w.MSG_LIST, w.path_payload("/d"), 5)
    finally:
        fa.close()


def test_a_callback_that_calls_its_sandbox_is_told_so():
    def script(s):
        _, call_id, _ = recv_frame(s)
        s.sendall(w.frame(w.MSG_STDOUT, call_id, b"x") + w.frame(w.MSG_EXIT, call_id, bytes(16)))
    fa = FakeAgent(script)
    try:
        conn = _conn.AgentConnection(fa.path, timeout=5)
        call = _calls.ExecCall(["x"], lambda t: ping(conn), None, 1 << 20)
        conn.start(call, w.MSG_EXEC, w.exec_payload(["x"], []))
        assert conn.wait(call, 5)  # no deadlock: the nested call fails at once
        with pytest.raises(SandboxError, match="callback cannot call its sandbox"):
            call.result(check=True)
    finally:
        fa.close()
