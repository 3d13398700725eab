#!/usr/bin/env python3
# sandboxctl against a guest that does not play along (issue 13, "no guest-driven denial of
# service"), natively: the VMM and its agent are fake_vmm.py, hostile where asked.
#   cp out stops at the size the guest gave (nothing left under the name), cp out and in at
#   their deadline (cp --timeout), an agent's error message reaches us made printable;
#   exec of a command that ignores its signals ends on a second SIGINT (130) or 5 s after a
#   SIGTERM (143), having passed each on and then a SIGKILL;
#   run likewise ends (130) and removes its sandbox; a run killed with SIGKILL takes its VMM
#   with it (the lifeline: status 7);
#   create --ttl: the VMM gets --timeout, ls shows what is left, start after a stop gets the
#   rest, an ended lifetime is refused (125) and shows "ended";
#   a create whose agent never answers fails (125) saying so, with the end of the console of
#   the sandbox it removed, and leaves nothing behind;
#   snapshots (issue 29): a same-size edit of `memory` (its mtime put back) is refused at
#   restore and at a warm create (which boots instead), state.fdt swapped after sandboxctl's
#   check is not what the VMM loads, a seal is refused while the VMM holds `memory` open for
#   writing, and (as root, with ip and nft) an edited net.policy.yaml or net.credentials is
#   refused at restore.
#
# usage: ctl_hostile.py SANDBOXCTL FAKE_VMM [SANDBOX_DISK]
import hashlib, json, mmap, os, shutil, signal, subprocess, sys, tempfile, time

ctl, fake = sys.argv[1], sys.argv[2]
disk_tool = sys.argv[3] if len(sys.argv) > 3 else None
home = tempfile.mkdtemp()
vmm_log = os.path.join(home, "fake.log")
env = dict(os.environ, SANDBOX_HOME=home, SANDBOX_VMM=fake, SANDBOX_SKIP_HOST_CHECK="1",
           FAKE_VMM_LOG=vmm_log, FAKE_VMM_SANDBOX_DISK=disk_tool or "")


def fail(msg):
    print("FAIL: " + msg)
    cleanup()
    sys.exit(1)


def cleanup():
    for sid in os.listdir(os.path.join(home, "sandboxes")) if os.path.isdir(
            os.path.join(home, "sandboxes")) else []:
        if not sid.startswith("."):
            subprocess.run([ctl, "rm", "-f", sid], env=env, capture_output=True, timeout=60)
    shutil.rmtree(home, ignore_errors=True)


def run(*args, timeout=30, stdin=None):
    try:
        return subprocess.run([ctl, *args], env=env, capture_output=True, timeout=timeout,
                              stdin=stdin)
    except subprocess.TimeoutExpired:
        fail(f"sandboxctl {' '.join(args)} still running after {timeout} s")


def log_lines():
    with open(vmm_log) as f:
        return f.read().splitlines()


def wait_for(cond, what, secs=10):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    fail(f"{what}: not within {secs} s")


def create(*extra):
    r = run("create", "--image", "fake", "--network", "none", "--memory", "128", *extra)
    if r.returncode != 0:
        fail(f"create: status {r.returncode}: {r.stderr.decode()}")
    return r.stdout.decode().strip()


def check_cp(sid):
    dst = os.path.join(home, "out")
    r = run("cp", f"{sid}:/exact", dst)
    if r.returncode != 0 or os.path.getsize(dst) != 100000:
        fail(f"cp of a well-behaved file: status {r.returncode} {r.stderr.decode()}")
    os.unlink(dst)
    t0 = time.monotonic()
    r = run("cp", f"{sid}:/oversize", dst)
    err = r.stderr.decode()
    if r.returncode != 1 or "sent more than the 100000 bytes its size said" not in err:
        fail(f"cp of a file the guest sends more of than it said: status {r.returncode}: {err}")
    left = [f for f in os.listdir(home) if f.startswith("out")]
    if left:
        fail(f"cp left {left} after it stopped")
    print(f"ok: cp out stopped at the announced size in {time.monotonic() - t0:.2f} s")
    t0 = time.monotonic()
    r = run("cp", "--timeout", "2", f"{sid}:/trickle", dst)
    took = time.monotonic() - t0
    if r.returncode != 1 or "not done within --timeout 2 s" not in r.stderr.decode() or \
            not 1.5 < took < 6:
        fail(f"cp out of a trickle: status {r.returncode} in {took:.1f} s: {r.stderr.decode()}")
    if [f for f in os.listdir(home) if f.startswith("out")]:
        fail("cp left a file after its deadline")
    print(f"ok: cp out of a trickling guest stopped at its deadline ({took:.2f} s)")
    src = os.path.join(home, "in.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(8 << 20))
    t0 = time.monotonic()
    r = run("cp", "--timeout", "3", src, f"{sid}:/hostile")
    took = time.monotonic() - t0
    if r.returncode != 1 or "not done within --timeout 3 s" not in r.stderr.decode() or \
            not 2.5 < took < 8:
        fail(f"cp in to a guest that floods and never reads: status {r.returncode} in "
             f"{took:.1f} s: {r.stderr.decode()}")
    print(f"ok: cp in to a flooding guest that stopped reading ended at its deadline "
          f"({took:.2f} s)")
    r = run("cp", f"{sid}:/missing", dst)
    err = r.stderr.decode()
    if r.returncode != 1 or "\033" in err or "\007" in err or "?]0;owned? here" not in err:
        fail(f"the agent's error message was not made printable: {err!r}")
    print("ok: the agent's error message printed as " + err.strip().split(": ", 2)[-1])


def signals_seen():
    return [int(l.split()[1]) for l in log_lines() if l.startswith("signal ")]


def check_exec(sid):
    for sig, want, secs in ((signal.SIGINT, 130, None), (signal.SIGTERM, 143, 5)):
        open(vmm_log, "a").close()
        before = len(signals_seen())
        p = subprocess.Popen([ctl, "exec", sid, "--", "ignore"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        p.send_signal(sig)
        wait_for(lambda: len(signals_seen()) > before, "the first signal passed on")
        time.sleep(0.5 if secs is None else 1)
        if p.poll() is not None:
            fail(f"exec ended after one {sig.name}, the command still running")
        t0 = time.monotonic()
        if secs is None:
            p.send_signal(sig)
        try:
            st = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            fail(f"exec still waiting 10 s after {sig.name}")
        took = time.monotonic() - t0
        # the SIGKILL was in the socket when exec ended: the fake notes it a moment later
        wait_for(lambda: signals_seen()[-1:] == [9],
                 f"the SIGKILL passed on (passed on: {signals_seen()[before:]}, exec: {st})", 5)
        seen = signals_seen()[before:]
        if st != want or seen[-1] != 9 or seen[0] != sig:
            fail(f"exec after {sig.name}: status {st} (want {want}), signals passed on {seen}:"
                 f" {p.stderr.read().decode()}")
        print(f"ok: exec of a command ignoring {sig.name} ended with {st} "
              f"{took:.2f} s after {'the second' if secs is None else 'the grace began'}; "
              f"the guest got {seen}")


def check_run():
    job = os.path.join(home, "job.yaml")
    with open(job, "w") as f:
        f.write("image: fake\nmemory: 128\nsteps:\n  - name: \"stuck\\e]0;owned\\a\"\n"
                "    run: ignore\n  - name: never\n    run: echo never\n")
    before = set(os.listdir(os.path.join(home, "sandboxes")))
    p = subprocess.Popen([ctl, "run", job], env=dict(env, FAKE_VMM_MUTE="1"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: any(l.startswith("argv ") and "--lifeline" in l for l in log_lines()[-1:]),
             "run's VMM started")
    time.sleep(1)  # the create waits for an agent that never answers
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        st = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("run still creating 10 s after SIGINT")
    took = time.monotonic() - t0
    left = set(os.listdir(os.path.join(home, "sandboxes"))) - before
    if st != 130 or left or "interrupted by signal 2" not in p.stderr.read().decode():
        fail(f"run interrupted while creating: status {st}, left {left}")
    wait_for(lambda: log_lines()[-1].startswith("exit "), "the VMM of an interrupted create gone")
    print(f"ok: run interrupted while creating: 130 in {took:.2f} s, nothing left")
    for how in ("twice", "kill"):
        before = set(os.listdir(os.path.join(home, "sandboxes")))
        p = subprocess.Popen([ctl, "run", job], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        wait_for(lambda: len(set(os.listdir(os.path.join(home, "sandboxes"))) - before) == 1,
                 "run's sandbox")
        sid = (set(os.listdir(os.path.join(home, "sandboxes"))) - before).pop()
        wait_for(lambda: os.path.exists(os.path.join(home, "sandboxes", sid, "pid")),
                 "run's VMM")
        with open(os.path.join(home, "sandboxes", sid, "pid")) as f:
            vmm_pid = int(f.read().split()[0])
        wait_for(lambda: any(l.startswith("argv ") and sid in l and "--lifeline" in l
                             for l in log_lines()), "the VMM given a --lifeline")
        time.sleep(1.5)  # into the step
        if how == "twice":
            p.send_signal(signal.SIGINT)
            time.sleep(0.5)
            p.send_signal(signal.SIGINT)
            try:
                st = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                fail("run still going 30 s after a second SIGINT")
            out, err = p.stdout.read().decode(), p.stderr.read().decode()
            if st != 130 or "never" in out:
                fail(f"run after two SIGINTs: status {st}, output {out!r}, {err}")
            if "\033" in err or "==> [1/2] stuck?]0;owned?\n" not in err:
                fail(f"run printed the step's name as it is: {err!r}")
            if os.path.exists(os.path.join(home, "sandboxes", sid)):
                fail("run left its sandbox after two SIGINTs")
            print("ok: run of a step ignoring SIGINT ended with 130 on the second, its "
                  "sandbox removed")
        else:
            t0 = time.monotonic()
            p.kill()
            p.wait()
            try:
                os.waitpid(vmm_pid, 0)  # not our child: poll instead
            except ChildProcessError:
                pass
            wait_for(lambda: not os.path.exists(f"/proc/{vmm_pid}") or
                     open(f"/proc/{vmm_pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
                     "the VMM gone after run's SIGKILL")
            took = time.monotonic() - t0
            if "exit 7" not in log_lines()[-1]:
                fail(f"the VMM's end: {log_lines()[-1]}")
            print(f"ok: run killed with SIGKILL: its VMM stopped {took:.2f} s later with "
                  f"status 7 (the lifeline)")


def check_ttl():
    sid = create("--ttl", "90s")
    argv = [l for l in log_lines() if l.startswith("argv ") and sid in l][-1].split()
    if argv[argv.index("--timeout") + 1] not in ("89", "90"):
        fail(f"create --ttl 90s gave the VMM {argv}")
    ls = json.loads(run("ls", "--json").stdout)
    me = [s for s in ls if s["id"] == sid][0]
    if not 0 < me["deadline"] - time.time() <= 90:
        fail(f"ls --json deadline {me['deadline']}")
    table = run("ls").stdout.decode()
    if not any(l.startswith(sid) and l.split()[-1] in ("1m30s", "1m29s", "1m28s")
               for l in table.splitlines()):
        fail(f"ls does not show the ttl left:\n{table}")
    if run("stop", sid).returncode != 0:
        fail("stop")
    time.sleep(2)
    r = run("start", sid)
    if r.returncode != 0:
        fail(f"start: {r.stderr.decode()}")
    argv = [l for l in log_lines() if l.startswith("argv ") and sid in l][-1].split()
    left = int(argv[argv.index("--timeout") + 1])
    if not 80 <= left <= 88:
        fail(f"start after 2 s stopped re-armed {left} s")
    print(f"ok: create --ttl 90s: --timeout 90, ls shows it; start after a stop: --timeout "
          f"{left}")
    run("stop", sid)
    cfg = os.path.join(home, "sandboxes", sid, "config")
    with open(cfg) as f:
        lines = [l for l in f.read().splitlines() if not l.startswith("deadline ")]
    with open(cfg, "w") as f:
        f.write("\n".join(lines + [f"deadline {int(time.time()) - 5}"]) + "\n")
    r = run("start", sid)
    if r.returncode != 125 or "lifetime (create --ttl) ended" not in r.stderr.decode():
        fail(f"start past the deadline: status {r.returncode}: {r.stderr.decode()}")
    if not any(l.startswith(sid) and l.split()[-1] == "ended"
               for l in run("ls").stdout.decode().splitlines()):
        fail("ls does not say the lifetime ended")
    print("ok: start after the lifetime ended is refused (125), ls says ended")
    sid = create("--ttl", "2s")
    wait_for(lambda: any(l.startswith(sid) and " dead " in l
                         for l in run("ls").stdout.decode().splitlines()), "ttl 2s ending", 10)
    print("ok: create --ttl 2s: the VMM ended at 2 s (status 6: "
          f"{'exit 6' in log_lines()}), ls shows it dead")


def check_silent_agent():
    before = set(os.listdir(os.path.join(home, "sandboxes")))
    r = subprocess.run([ctl, "create", "--image", "fake", "--network", "none", "--memory", "128",
                        "--timeout", "2"], env=dict(env, FAKE_VMM_MUTE="1",
                                                   FAKE_VMM_SAY="fake console: still booting"),
                       capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 125 or "did not answer within 2 s" not in err:
        fail(f"create with a silent agent: status {r.returncode}, stderr {err!r}")
    if "--- last lines of " not in err or "  fake console: still booting" not in err:
        fail(f"create with a silent agent did not show its console's end: {err!r}")
    if set(os.listdir(os.path.join(home, "sandboxes"))) - before:
        fail("create with a silent agent left its sandbox behind")
    print("ok: create with a silent agent: 125, the console's end shown, nothing left")


def control(name, on):
    """The fake VMM's control files (fake_vmm.py's header)."""
    path = os.path.join(home, name)
    if on:
        open(path, "w").close()
    elif os.path.exists(path):
        os.unlink(path)


def snapshot_of(sid, name, *extra):
    r = run("snapshot", sid, name, *extra)
    if r.returncode != 0:
        fail(f"snapshot {sid} {name}: status {r.returncode}: {r.stderr.decode()}")
    return os.path.join(home, "snapshots", name)


def restore_refused(name, why, want):
    r = run("restore", name)
    err = r.stderr.decode()
    if r.returncode == 0 or want not in err:
        fail(f"restore of a snapshot whose {why}: status {r.returncode}, stdout "
             f"{r.stdout.decode().strip()!r}, stderr {err!r}")
    print(f"ok: restore of a snapshot whose {why} refused: {err.strip().splitlines()[-1]}")


def edit_keeping_times(path, offset, data):
    """A same-size edit, with the file's mtime and atime put back."""
    st = os.stat(path)
    os.chmod(path, 0o600)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    os.chmod(path, st.st_mode & 0o777)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def check_snapshots():
    control("fake.snap", True)
    with open(os.path.join(home, "images", "fake", "hash"), "w") as f:
        f.write("ab" * 32 + "\n")  # an image with a hash has ready snapshots
    sid = create()
    snap = snapshot_of(sid, "s1")
    for f in ("memory", "state.fdt"):
        st = os.stat(os.path.join(snap, f))
        if st.st_uid != 0 or st.st_mode & 0o222:
            fail(f"a sealed snapshot's {f}: uid {st.st_uid} mode {oct(st.st_mode)}")
    r = run("restore", "s1")
    if r.returncode != 0:
        fail(f"restore of a good snapshot: {r.stderr.decode()}")
    argv = [l for l in log_lines() if l.startswith("argv ") and "--restore" in l][-1].split()
    if "--restore-state-fd" not in argv or "--restore-memory-fd" not in argv:
        fail(f"a restore's VMM was not given the checked state and memory as fds: {argv}")
    print("ok: a sealed snapshot's files are root's and read-only; its restore gets them as "
          "fds")
    # state.fdt replaced on disk once sandboxctl checked it: the VMM loads the checked bytes
    with open(os.path.join(snap, "state.fdt"), "rb") as f:
        good = hashlib.sha256(f.read()).hexdigest()
    control("fake.swap", True)
    r = run("restore", "s1")
    control("fake.swap", False)
    seen = [l.split()[1] for l in log_lines() if l.startswith("state ")][-1]
    if r.returncode == 0 and seen != good:
        fail(f"state.fdt swapped after the check: the VMM loaded {seen}, the checked state "
             f"is {good}")
    print("ok: state.fdt swapped after the check: the VMM loaded the checked bytes" if
          r.returncode == 0 else "ok: state.fdt swapped after the check: refused")
    snap = snapshot_of(sid, "s2")
    edit_keeping_times(os.path.join(snap, "memory"), 8192 + 3, b"X")
    restore_refused("s2", "memory was edited (same size, same mtime)", "memory file changed")
    # memory replaced by another user's file (a copy, or a link to a file they own) that a
    # process still maps writable: refused, it could change after the check; once let go,
    # the restore makes it root's and read-only before checking it
    snap = snapshot_of(sid, "s3")
    mem = os.path.join(snap, "memory")
    shutil.copyfile(mem, mem + ".theirs")
    os.chown(mem + ".theirs", 65534, 65534)
    os.chmod(mem + ".theirs", 0o644)
    os.replace(mem + ".theirs", mem)
    with open(mem, "r+b") as f:
        writer = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    restore_refused("s3", "memory another process still maps writable", "open for writing")
    writer.close()
    r = run("restore", "s3")
    st = os.stat(mem)
    if r.returncode != 0 or st.st_uid != 0 or st.st_mode & 0o7777 != 0o400:
        fail(f"restore of a snapshot whose memory is another user's: status {r.returncode}, "
             f"uid {st.st_uid} mode {oct(st.st_mode)}: {r.stderr.decode()!r}")
    print("ok: a restore makes another user's memory file root's and read-only first")
    # a seal while the VMM still holds `memory` open for writing
    sid2 = create()
    control("fake.hold", True)
    r = run("snapshot", sid2, "held")
    control("fake.hold", False)
    if r.returncode == 0 or os.path.exists(os.path.join(home, "snapshots", "held")) or \
            "open for writing" not in r.stderr.decode():
        fail(f"a snapshot whose memory the VMM still holds open for writing: status "
             f"{r.returncode}: {r.stderr.decode()!r}")
    print("ok: a seal while the VMM holds the memory file open for writing is refused")
    # a warm create from a tampered ready snapshot boots instead
    ready = [d for d in os.listdir(os.path.join(home, "snapshots")) if d.startswith(".ready-")
             and not d.endswith(".lock")]
    if not ready:
        fail("no ready snapshot was made by the creates")
    edit_keeping_times(os.path.join(home, "snapshots", ready[0], "memory"), 8192 + 5, b"Y")
    r = run("create", "--image", "fake", "--network", "none", "--memory", "128")
    argv = [l for l in log_lines() if l.startswith("argv ")][-1].split()
    if r.returncode != 0 or "--restore" in argv or "memory file changed" not in \
            r.stderr.decode():
        fail(f"a warm create from a ready snapshot whose memory was edited: status "
             f"{r.returncode}, VMM {argv[:3]}, stderr {r.stderr.decode()!r}")
    print("ok: a warm create from a ready snapshot whose memory was edited boots instead")
    if os.geteuid() == 0 and shutil.which("ip") and shutil.which("nft"):
        check_snapshot_net()
    else:
        print("skipped: snapshot proxy files (a network needs root, ip and nft)")
    control("fake.snap", False)


def check_snapshot_net():
    r = run("create", "--image", "fake", "--memory", "128", "--cold")
    if r.returncode != 0:
        fail(f"create with a network: {r.stderr.decode()}")
    sid = r.stdout.decode().strip()
    for name, f, add in (("p1", "net.policy.yaml", b"\nallow-cidr: [0.0.0.0/0]\n"),
                         ("p2", "net.credentials", b"\n# changed\n")):
        path = os.path.join(snapshot_of(sid, name), f)
        with open(path, "ab") as out:
            out.write(add)
        restore_refused(name, f"{f} was edited", "changed since the MAC")


def main():
    os.makedirs(os.path.join(home, "images", "fake"))
    for name, size in (("kernel", 1), ("initrd", 1), ("rootfs", 16 << 20)):
        with open(os.path.join(home, "images", "fake", name), "wb") as f:
            f.truncate(size)
    sid = create()
    check_cp(sid)
    check_exec(sid)
    check_ttl()
    check_silent_agent()
    if os.geteuid() == 0 and shutil.which("ip") and shutil.which("nft"):
        check_run()  # run's sandbox has a network: a namespace and the proxy
    else:
        print("skipped: run (its network needs root, ip and nft)")
    if disk_tool:
        check_snapshots()  # last: from here creates make and use ready snapshots
    else:
        print("skipped: snapshots (no sandbox-disk given)")
    cleanup()
    print("ok: sandboxctl held against a hostile guest")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:
        fail(f"{type(e).__name__}: {e}")
