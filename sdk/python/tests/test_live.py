# SPDX-License-Identifier: Apache-2.0
"""The SDK against real sandboxes (conftest.py says where they come from): create, run with
streamed output, background runs killed, files, snapshot, restore, fork, pause and resume,
suspend, the asyncio flavour, and the errors as their exceptions."""

import asyncio
import os
import time

import pytest

from sandbox_sdk import (AgentError, AsyncSandbox, CommandExitError, CommandNotFoundError,
                         CommandTimeoutError, Sandbox, SandboxNotFoundError,
                         SandboxStateError)

from conftest import LIVE_IMAGE, MEMORY

pytestmark = pytest.mark.live


def sandbox_dir(sid):
    return os.path.join(os.environ["SANDBOX_HOME"], "sandboxes", sid)


def test_run_output_status_env_cwd_user(sb):
    r = sb.run("echo out; echo err >&2; exit 0")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "err\n")
    r = sb.run(["sh", "-c", 'echo "$GREETING from $(pwd) as $(id -u):$(id -g)"'],
               env={"GREETING": "hello"}, cwd="/tmp", user="nobody")
    assert r.stdout == "hello from /tmp as 65534:65534\n"
    assert sb.run("id -u", user=1234).stdout == "1234\n"
    assert sb.run("exit 3", check=False).exit_code == 3
    assert sb.run("cat", stdin=b"fed through stdin").stdout == "fed through stdin"
    # More stdin than the agent buffers of output: cat's output must be read while its
    # input is still being sent (the agent stops reading us while its output waits)
    big = os.urandom(3 << 20)
    r = sb.run("cat", stdin=big, timeout=120)
    assert r.stdout_bytes == big
    with pytest.raises(ValueError):
        sb.run("cat", stdin=True)  # nothing would ever feed it


def test_output_streams_as_produced(sb):
    seen = []
    t0 = time.monotonic()
    r = sb.run("echo first; sleep 2; echo second",
               on_stdout=lambda s: seen.append((time.monotonic() - t0, s)))
    assert "".join(s for _, s in seen) == r.stdout == "first\nsecond\n"
    # "first" reached us while the command still slept: streamed, not buffered to the end
    assert seen[0][1].startswith("first") and seen[0][0] < r.duration - 1.0, seen


def test_background_run_killed(sb):
    h = sb.run("echo started; exec sleep 1000", background=True)
    deadline = time.monotonic() + 30
    while "started" not in h.stdout and time.monotonic() < deadline:
        time.sleep(0.05)
    assert h.pid and not h.done
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.5)
    assert h.kill()
    with pytest.raises(CommandExitError) as e:
        h.wait(timeout=30)
    assert e.value.result.signal == 9 and e.value.exit_code == 137
    assert not h.kill()  # it is gone: nothing to signal


def test_background_with_stdin_and_several_at_once(sb):
    h = sb.run("cat", background=True, stdin=True)
    others = [sb.run("sleep 1; echo %d" % i, background=True) for i in range(4)]
    h.send_stdin("line one\n")
    h.close_stdin()
    assert h.wait(30).stdout == "line one\n"
    assert [o.wait(30).stdout for o in others] == ["%d\n" % i for i in range(4)]


def test_files(sb):
    f = sb.files
    f.make_dir("/tmp/sdk/sub", parents=True)
    f.write("/tmp/sdk/a.txt", "hello files\n")
    blob = os.urandom(3 << 20)  # several DATA frames each way
    f.write("/tmp/sdk/sub/blob", blob, mode=0o600)
    assert f.read("/tmp/sdk/a.txt", text=True) == "hello files\n"
    assert f.read("/tmp/sdk/sub/blob") == blob
    names = {e.name: e for e in f.list("/tmp/sdk")}
    assert set(names) == {"a.txt", "sub"} and names["sub"].is_dir
    assert f.stat("/tmp/sdk/sub/blob").mode & 0o777 == 0o600
    assert sb.run("wc -c < /tmp/sdk/sub/blob").stdout.strip() == str(len(blob))
    f.remove("/tmp/sdk/a.txt")
    assert not f.exists("/tmp/sdk/a.txt")
    f.remove("/tmp/sdk", recursive=True)
    assert not f.exists("/tmp/sdk")
    with pytest.raises(FileNotFoundError):
        f.read("/tmp/sdk/none")


def test_errors(sb):
    with pytest.raises(SandboxNotFoundError):
        Sandbox.connect("nosuchsandbox")
    with pytest.raises(CommandNotFoundError) as e:
        sb.run(["no-such-program-here"])
    assert e.value.exit_code == 127 and "no-such-program-here" in str(e.value)
    t0 = time.monotonic()
    with pytest.raises(CommandTimeoutError) as e:
        sb.run("echo partial; sleep 100", timeout=1.5)
    assert e.value.result.timed_out and e.value.result.stdout == "partial\n"
    assert time.monotonic() - t0 < 30
    with pytest.raises(CommandExitError) as e:
        sb.run("echo oops >&2; exit 4")
    assert e.value.exit_code == 4 and "oops" in str(e.value)
    with pytest.raises(AgentError) as e:
        sb.run("true", cwd="/no/such/dir")
    assert "chdir /no/such/dir" in e.value.message
    assert sb.run("echo still fine").stdout == "still fine\n"


def test_pause_resume(sb):
    pid = sb.run("rm -f /tmp/ticks; (while :; do echo x >> /tmp/ticks; sleep 0.1; done) "
                 ">/dev/null 2>&1 & echo $!").stdout.strip()
    sb.pause()
    try:
        assert sb.status() == "paused"
        n1 = sb.files  # no agent call while paused: the guest cannot answer
        time.sleep(1.5)
    finally:
        sb.resume()
    assert sb.status() == "running" and n1 is sb.files
    a = int(sb.run("wc -l < /tmp/ticks").stdout)
    time.sleep(1.0)
    b = int(sb.run("wc -l < /tmp/ticks").stdout)
    assert b > a, (a, b)
    sb.run("kill %s" % pid)


def test_snapshot_restore_fork():
    with Sandbox.create(image=LIVE_IMAGE, memory=MEMORY, network="none", timeout=180) as p:
        p.files.write("/root/before", "before\n")
        p.run("sync")
        p.snapshot("sdk-snap")
        p.files.write("/root/after", "after\n")
        with Sandbox.restore("sdk-snap") as r:
            assert r.id != p.id
            assert r.files.read("/root/before", text=True) == "before\n"
            assert not r.files.exists("/root/after")
        kids = p.fork(2)
        try:
            assert len(kids) == 2 and len({k.id for k in kids} | {p.id}) == 3
            rand = set()
            for k in kids:
                assert k.files.read("/root/after", text=True) == "after\n"
                rand.add(k.run("head -c 16 /dev/urandom | od -An -tx1").stdout)
            assert len(rand) == 2, "two forks read the same random bytes"
            assert p.run("echo parent runs on").stdout == "parent runs on\n"
        finally:
            for k in kids:
                k.kill()
        assert not os.path.exists(sandbox_dir(kids[0].id))
    assert not os.path.exists(sandbox_dir(p.id)), "leaving the with block removes it"
    Sandbox.remove_snapshot("sdk-snap")


def test_suspend_resume():
    with Sandbox.create(image=LIVE_IMAGE, memory=MEMORY, network="none", timeout=180) as s:
        s.run("echo kept > /tmp/state")
        s.suspend()
        assert s.status() == "suspended"
        with pytest.raises(SandboxStateError):
            s.run("true")
        s.resume()
        assert s.status() == "running"
        assert s.files.read("/tmp/state", text=True) == "kept\n"


def test_asyncio(sb):
    async def main():
        sa = await AsyncSandbox.connect(sb.id)
        try:
            chunks = []
            r = await sa.run("echo a; echo b >&2", on_stdout=chunks.append)
            assert (r.stdout, r.stderr, "".join(chunks)) == ("a\n", "b\n", "a\n")

            async def slow(text):  # a coroutine callback is awaited
                await asyncio.sleep(0)
                chunks.append(text.upper())
            await sa.run("echo c", on_stdout=slow)
            assert chunks[-1] == "C\n"
            rs = await asyncio.gather(*(sa.run("echo %d" % i) for i in range(5)))
            assert [x.stdout for x in rs] == ["%d\n" % i for i in range(5)]
            await sa.files.write("/tmp/async.txt", b"async bytes")
            assert await sa.files.read("/tmp/async.txt") == b"async bytes"
            assert "async.txt" in [e.name for e in await sa.files.list("/tmp")]
            await sa.files.remove("/tmp/async.txt")
            h = await sa.run("sleep 1000", background=True)
            assert await h.kill()
            with pytest.raises(CommandExitError):
                await h.wait(30)
            with pytest.raises(CommandTimeoutError):
                await sa.run("sleep 100", timeout=1)
            with pytest.raises(CommandNotFoundError):
                await sa.run(["no-such-program-here"])
            await sa.pause()
            assert await sa.status() == "paused"
            await sa.resume()
            assert (await sa.run("echo back")).stdout == "back\n"
        finally:
            await sa.close()  # connected, not owned: the sandbox stays
        with pytest.raises(SandboxNotFoundError):
            await AsyncSandbox.connect("nosuchsandbox")
    asyncio.run(main())
    assert sb.run("echo after asyncio").stdout == "after asyncio\n"
