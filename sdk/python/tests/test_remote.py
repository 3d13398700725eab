# SPDX-License-Identifier: Apache-2.0
"""The SDK's remote mode against the sandbox service (sandboxd): the subset of issue 30's
"Done when" the LangSmith JS scenario checks (tests/service/scenario.mjs), through our SDK:
create, get, list, run (exit codes, stdout and stderr apart, env, cwd), streaming callbacks,
background runs with stdin and kill, reconnect after a dropped socket and by command id, pty,
files (all 256 byte values, 5 MiB), snapshot and a create from it, stop and start keeping
state, delete, and the not-found, authentication and quota errors as the SDK's exceptions.

Skipped unless SANDBOX_API_URL and SANDBOX_API_KEY name a service (the SDK reads both);
SANDBOX_API_KEY2 is a key of a second workspace whose quota is vcpus=1.
tests/integration/sdk_remote.sh starts sandboxd where Linux guests boot and runs this file.
"""

import asyncio
import os
import socket
import time

import pytest

from sandbox_sdk import (AsyncSandbox, AuthenticationError, CommandExitError,
                         CommandNotFoundError, CommandTimeoutError, QuotaExceededError,
                         RemoteSandbox, RemoteUnsupportedError, Sandbox, SandboxNotFoundError,
                         ServiceError)

URL = os.environ.get("SANDBOX_API_URL")
KEY2 = os.environ.get("SANDBOX_API_KEY2")

pytestmark = pytest.mark.skipif(not (URL and os.environ.get("SANDBOX_API_KEY")),
                                reason="no sandbox service: set SANDBOX_API_URL and "
                                "SANDBOX_API_KEY (tests/integration/sdk_remote.sh does)")

COUNT = "i=0; while [ $i -lt 40 ]; do echo line$i; i=$((i+1)); sleep 0.05; done; echo end >&2"
COUNTED = "".join("line%d\n" % i for i in range(40))


def wait_for(pred, what, limit=30.0):
    end = time.monotonic() + limit
    while not pred():
        assert time.monotonic() < end, "no %s within %.0f s" % (what, limit)
        time.sleep(0.02)


@pytest.fixture(scope="module")
def sb():
    """One sandbox the tests share, on the service's default image (the env's URL and key)."""
    with Sandbox.create(name="py-remote", timeout=180) as s:
        yield s


def test_create_get_list(sb):
    assert isinstance(sb, RemoteSandbox) and sb.name == "py-remote" and sb.id
    got = Sandbox.connect("py-remote")
    assert got.id == sb.id and got.status() == "running"
    assert Sandbox.connect(sb.id).name == "py-remote"
    assert "py-remote" in [b["name"] for b in RemoteSandbox.list()]


def test_run_status_streams_env_cwd(sb):
    r = sb.run("echo out; echo err >&2; exit 0")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "err\n")
    assert sb.run("exit 3", check=False).exit_code == 3
    with pytest.raises(CommandExitError) as e:
        sb.run("echo oops >&2; exit 4")
    assert e.value.exit_code == 4 and "oops" in str(e.value)
    r = sb.run('echo "$GREETING from $(pwd)"', env={"GREETING": "hello"}, cwd="/tmp")
    assert r.stdout == "hello from /tmp\n"
    with pytest.raises(CommandNotFoundError):
        sb.run("no-such-program-here")
    assert sb.run("cat", stdin=b"fed through stdin").stdout == "fed through stdin"
    with pytest.raises(CommandTimeoutError):
        sb.run("echo partial; sleep 100", timeout=2)


def test_output_streams_as_produced(sb):
    seen = []
    t0 = time.monotonic()
    r = sb.run("echo first; sleep 2; echo second",
               on_stdout=lambda s: seen.append((time.monotonic() - t0, s)))
    assert "".join(s for _, s in seen) == r.stdout == "first\nsecond\n"
    assert seen[0][1].startswith("first") and seen[0][0] < r.duration - 1.0, seen


def test_background_stdin_and_kill(sb):
    h = sb.run("cat; echo end", background=True, stdin=True)
    wait_for(lambda: h.pid is not None, "started")
    h.send_stdin("line one\n")
    h.close_stdin()
    assert h.wait(30).stdout == "line one\nend\n"
    k = sb.run("echo started; exec sleep 1000", background=True)
    wait_for(lambda: "started" in k.stdout, "output")
    assert not k.done and k.pid
    with pytest.raises(TimeoutError):
        k.wait(timeout=0.5)
    assert k.kill()
    with pytest.raises(CommandExitError) as e:
        k.wait(timeout=30)
    assert e.value.exit_code == 137
    assert not k.kill()


def test_reconnect_after_a_drop_and_by_id(sb):
    chunks = []
    h = sb.run(COUNT, on_stdout=chunks.append, background=True)
    wait_for(lambda: "line5\n" in h.stdout, "line5")
    h._call._ws._sock.shutdown(socket.SHUT_RDWR)  # the socket drops mid-stream
    r = h.wait(60)
    # nothing lost and nothing repeated, in the result and through the callback
    assert r.stdout == COUNTED and r.stderr == "end\n" and "".join(chunks) == COUNTED
    # another client (a new object) attaches by the command's id and gets it all again
    other = Sandbox.connect(sb.name)
    again = other.reconnect(h.command_id).wait(30)
    assert (again.stdout, again.stderr, again.exit_code) == (COUNTED, "end\n", 0)
    with pytest.raises(SandboxNotFoundError):
        other.reconnect("no-such-command-id").wait(30)


def test_pty(sb):
    r = sb.run("tty; echo to-stderr >&2", pty=True)
    assert r.stdout.startswith("/dev/pts/") and "to-stderr" in r.stdout and r.stderr == ""
    r = sb.run("test -t 0 && echo yes || echo no")
    assert r.stdout == "no\n"


def test_files(sb):
    f = sb.files
    f.write("/root/sdk/a.txt", "hello files\n")  # its directory made on the way
    every = bytes(range(256)) * 4
    f.write("/root/sdk/bytes", every)
    big = os.urandom(5 << 20)
    f.write("/root/sdk/big", big)
    assert f.read("/root/sdk/a.txt", text=True) == "hello files\n"
    assert f.read("/root/sdk/bytes") == every
    assert f.read("/root/sdk/big") == big
    assert sb.run("wc -c < /root/sdk/big").stdout.strip() == str(len(big))
    assert f.stat("/root/sdk/big").size == len(big) and f.exists("/root/sdk/a.txt")
    with pytest.raises(FileNotFoundError):
        f.read("/root/sdk/none")
    assert not f.exists("/root/sdk/none")
    with pytest.raises(ServiceError):  # max_bytes bounds a read, whatever the file's size
        f.read("/root/sdk/big", max_bytes=1 << 20)
    f.remove("/root/sdk/big")
    assert not f.exists("/root/sdk/big")


def test_errors_are_the_sdks():
    with pytest.raises(SandboxNotFoundError):
        Sandbox.connect("no-such-sandbox")
    with pytest.raises(AuthenticationError):
        Sandbox.connect("py-remote", api_key="sk-wrong")
    with pytest.raises(AuthenticationError):
        RemoteSandbox.list(api_key="sk-wrong")
    if KEY2:
        with pytest.raises(QuotaExceededError) as e:
            Sandbox.create(cpus=2, api_key=KEY2)
        assert e.value.quota_type == "cpu"
        # another workspace's sandbox does not exist for this key
        with pytest.raises(SandboxNotFoundError):
            Sandbox.connect("py-remote", api_key=KEY2)


def test_local_only_calls_say_so(sb):
    for call in (lambda: sb.fork(), lambda: sb.pause(), lambda: sb.run(["echo", "x"]),
                 lambda: sb.files.write("/tmp/x", "x", mode=0o600),
                 lambda: Sandbox.create(image="debian"), lambda: Sandbox.create(ttl="10m")):
        with pytest.raises(RemoteUnsupportedError) as e:
            call()
        assert "remote mode" in str(e.value)


def test_asyncio(sb):
    async def main():
        sa = await AsyncSandbox.connect(sb.name)
        chunks = []

        async def slow(text):  # a coroutine callback runs on the loop
            await asyncio.sleep(0)
            chunks.append(text.upper())
        r = await sa.run("echo a; echo b >&2", on_stdout=slow)
        assert (r.stdout, r.stderr, "".join(chunks)) == ("a\n", "b\n", "A\n")
        rs = await asyncio.gather(*(sa.run("echo %d" % i) for i in range(3)))
        assert [x.stdout for x in rs] == ["%d\n" % i for i in range(3)]
        await sa.files.write("/tmp/async.txt", b"async bytes")
        assert await sa.files.read("/tmp/async.txt") == b"async bytes"
        h = await sa.run("sleep 1000", background=True)
        assert await h.kill()
        with pytest.raises(CommandExitError):
            await h.wait(30)
        with pytest.raises(SandboxNotFoundError):
            await AsyncSandbox.connect("no-such-sandbox")
    asyncio.run(main())


def test_snapshot_create_from_it_stop_start_delete(sb):
    sb.run("echo before > /root/state; sync")
    assert sb.snapshot("py-remote-snap") == "py-remote-snap"
    sb.run("echo after > /root/state")
    with Sandbox.restore("py-remote-snap", name="py-remote-2") as r:
        assert r.id != sb.id
        assert r.files.read("/root/state", text=True) == "before\n"
        # stop keeps the disk and a process's memory; start brings both back
        r.run("sleep 1000 >/dev/null 2>&1 & echo $! > /root/pid")
        r.suspend()
        assert r.status() == "suspended"
        r.resume()
        assert r.status() == "running"
        assert r.files.read("/root/state", text=True) == "before\n"
        assert r.run("kill -0 $(cat /root/pid) && echo alive").stdout == "alive\n"
    with pytest.raises(SandboxNotFoundError):  # leaving the block deleted it
        Sandbox.connect("py-remote-2")
    Sandbox.remove_snapshot("py-remote-snap")
    with pytest.raises(SandboxNotFoundError):
        Sandbox.restore("py-remote-snap")
    name = sb.name
    sb.kill()
    with pytest.raises(SandboxNotFoundError):
        Sandbox.connect(name)

