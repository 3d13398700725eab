#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fleet's checks of the object store on real guests (api_checks.py runs them on its
topology): snapshots restored on another host, corrupt chunks refused, stops into the store and
wakes elsewhere, two wakes racing, `sandboxd drain`, push and pull, a host's power lost, and a
checkpointed box woken elsewhere from its checkpoint."""
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

from topology import (
    API_PORT, BUCKET, HOSTS, MEM, NET, api, boxes_on, check, fill_all, free_slot_on, host_of,
    owner_of, run, say, sh, wait_up)


def swift_objects(swift_dir, prefix):
    """(path, name) of every object stored under prefix, read from Swift's disk (its objects'
    names are in their metadata xattrs, pickled by Swift: our own test's files)."""
    import pickle
    for root, _, files in os.walk(os.path.join(swift_dir, "swift", "srv")):
        for f in files:
            if not f.endswith(".data"):
                continue
            path = os.path.join(root, f)
            raw, i = b"", 0
            while True:
                try:
                    raw += os.getxattr(path, "user.swift.metadata" + (str(i) if i else ""))
                except OSError:
                    break
                i += 1
            try:  # (Swift writes its keys and values as bytes)
                meta = pickle.loads(raw, encoding="bytes")
                name = meta.get(b"name", meta.get("name", b""))
                name = name.decode() if isinstance(name, bytes) else name
            except Exception:
                continue
            if "/%s/%s" % (BUCKET, prefix) in name:
                yield path, name


def corrupt_chunks(swift_dir, prefix):
    """Every stored chunk object under prefix with bytes flipped in place, on Swift's disk."""
    n = 0
    for path, _ in swift_objects(swift_dir, prefix):
        with open(path, "r+b") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(size // 2)
            b = fh.read(16)
            fh.seek(size // 2)
            fh.write(bytes(x ^ 0xff for x in b))
        n += 1
    return n


def snapshots(t, key, live):
    """A snapshot taken on one host restored on another from the store; then the store's
    chunks corrupted: a restore on a third host refuses, naming a chunk. live: name -> box,
    kept up to date (the boxes this deletes to make room go from it)."""
    src = live[sorted(live)[0]]
    a_host = host_of(owner_of(src))
    b_host, c_host = [i for i in range(1, HOSTS + 1) if i != a_host][:2]
    # (synced and out of the page cache: the restored box reads it from its lazy disk layer)
    out = run(src, key, "echo kept > /root/mark; setsid sleep 1000 </dev/null >/dev/null 2>&1 & "
              "sync; echo 3 > /proc/sys/vm/drop_caches; echo started")
    st, snap = api(b_host, key, "POST", "/v2/sandboxes/boxes/%s/snapshot" % src["name"],
                   {"name": "fleet-snap"})
    ok = out.strip() == "started" and st == 200 and isinstance(snap, dict) and "id" in snap
    deadline = time.time() + 300
    while ok and time.time() < deadline:
        st, snap = api(c_host, key, "GET", "/v2/sandboxes/snapshots/%s" % snap["id"])
        if st != 200 or snap.get("status") != "building":
            break
        time.sleep(1)
    ready = ok and st == 200 and snap.get("status") == "ready"
    check(ready, "a capture through fh%d of a box on fh%d is ready (in the store), seen "
          "through fh%d: %s %s" % (b_host, a_host, c_host, st,
                                   snap.get("status_message") if isinstance(snap, dict) else
                                   snap))
    if not ready:
        return
    freed = free_slot_on(t, key, live, b_host)
    t0 = time.time()
    st, rb = api(c_host, key, "POST", "/v2/sandboxes/boxes",
                 {"name": "restored", "snapshot_id": snap["id"], "mem_bytes": MEM,
                  "timeout": 240})
    secs = time.time() - t0
    where = host_of(owner_of(rb)) if st == 200 else 0
    out = run(rb, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 1000'") \
        if st == 200 else ""
    check(freed and st == 200 and where == b_host and out.startswith("kept") and
          len(out.split()) >= 2,
          "a create from it through fh%d lands on fh%d (the only free slot), restored from the "
          "store in %.1f s: the file and the background process are there (%r; %s)" % (
              c_host, where, secs, out[:80], "" if st == 200 else rb))
    t.snap = (snap, a_host, c_host)
    if st == 200:
        lazy_figures(t, rb, b_host)


def lazy_figures(t, box, host):
    """The restore was lazy: what came of its memory before its first answer (the host's log,
    once the rest followed) is less than all of it; its disk layer was read as it came (the
    file the box reads after it is in no page cache: it waited for it)."""
    pat = re.compile(r"box %s: its memory in from the store in (\d+) ms: (\d+) MiB .*, "
                     r"(\d+) MiB of it before its first answer .*; its disk layers: (\d+) "
                     r"reads waited for them \((\d+) before that answer\), (\d+) chunks "
                     r"filled after" % re.escape(box["id"]))
    deadline, m = time.time() + 120, None
    while time.time() < deadline and not m:
        m = pat.search(t.log(host))
        time.sleep(1)
    total, before = (int(m.group(2)), int(m.group(3))) if m else (0, 0)
    check(m is not None and before < total,
          "its memory came lazily: %d MiB of %d MiB before its first answer, all of it in %s "
          "ms" % (before, total, m.group(1) if m else "?"))
    waits, fills = (int(m.group(4)), int(m.group(6))) if m else (0, 0)
    check(m is not None and waits > 0,
          "its disk layers came lazily: %d reads waited for their chunks (%s before its first "
          "answer), %d chunks filled after" % (waits, m.group(5) if m else "?", fills))


def locality(t, key, live):
    """A create from a snapshot goes first to the host that made it: with a slot free there
    and one on a host that never held it, a create through the latter lands on the former,
    which restores it from its own copy (no pull)."""
    snap, a_host, c_host = t.snap
    try:
        freed = free_slot_on(t, key, live, a_host) and free_slot_on(t, key, live, c_host)
    except StopIteration:
        freed = False
    pulls = t.log(a_host).count(": pulled")
    t0 = time.time()
    st, rb = api(c_host, key, "POST", "/v2/sandboxes/boxes",
                 {"name": "near-restored", "snapshot_id": snap["id"], "mem_bytes": MEM,
                  "timeout": 240})
    secs = time.time() - t0
    where = host_of(owner_of(rb)) if st == 200 else 0
    out = run(rb, key, "cat /root/mark") if st == 200 else ""
    if st == 200:
        live[rb["name"]] = rb
    check(freed and st == 200 and where == a_host and out.startswith("kept") and
          t.log(a_host).count(": pulled") == pulls,
          "a create through fh%d from the snapshot fh%d made, slots free on both: placed on "
          "fh%d, from its own copy (no pull), ready in %.1f s (%r; %s)" % (
              c_host, a_host, where, secs, out[:40], "" if st == 200 else rb))


def corruption(t, key, live):
    """Every chunk of the workspace corrupted in the store (last: the store is spoiled for this
    workspace after it); the only free slot on a host that never held the snapshot: its
    restore must refuse, naming a chunk, and leave nothing running."""
    snap, _, _ = t.snap
    n = corrupt_chunks(t.a.swift_dir, "w/team/c/")
    # the host that stays (not drained, not killed), its own copy of the snapshot removed: its
    # restore pulls from the store
    c_host = next(i for i in range(1, HOSTS + 1)
                  if i not in (getattr(t, "drained", 0), getattr(t, "killed", 0)))
    sh("rm", "-rf", os.path.join(t.home(c_host), "snapshots",
                                 "api-" + snap["id"].replace("-", "")))
    cache = os.path.join(t.home(c_host), "service", "chunk-cache")  # (its chunks too)
    for f in os.listdir(cache) if os.path.isdir(cache) else []:
        os.unlink(os.path.join(cache, f))
    try:
        freed = free_slot_on(t, key, live, c_host) if n else False
    except StopIteration:
        freed = False
    for _ in range(2):  # (a slot freed may be taken first: another freed, once)
        st, bad = api(c_host, key, "POST", "/v2/sandboxes/boxes",
                      {"name": "from-bad", "snapshot_id": snap["id"], "mem_bytes": MEM,
                       "timeout": 240})
        if st != 503 or "Unschedulable" not in json.dumps(bad):
            break
        say("no room on fh%d for the restore: another slot freed there" % c_host)
        try:
            free_slot_on(t, key, live, c_host)
        except StopIteration:
            break
    msg = json.dumps(bad)
    st_get, _ = api(c_host, key, "GET", "/v2/sandboxes/boxes/from-bad")
    check(n > 0 and freed and st != 200 and "chunk" in msg and st_get == 404,
          "%d chunks corrupted in the store: a restore on fh%d refuses (%d: %.200s) and leaves "
          "no box (%d)" % (n, c_host, st, msg, st_get))


def stop_via(key, box, via, seen_via):
    """A stop of box through host via, then its status read through host seen_via until it
    is stopped (at most 300 s): (the stop's HTTP status, the last status seen)."""
    st, _ = api(via, key, "POST", "/v2/sandboxes/boxes/%s/stop" % box["name"])
    deadline, status = time.time() + 300, None
    while st == 204 and time.time() < deadline:
        st2, b = api(seen_via, key, "GET", "/v2/sandboxes/boxes/%s" % box["name"])
        status = b.get("status") if st2 == 200 else st2
        if status == "stopped":
            break
        time.sleep(1)
    return st, status


def moves(t, key, live):
    """A box stopped into the store on one host; the next run through its unchanged
    dataplane_url (naming that host) wakes it on another, with its file and process."""
    src = live.pop(sorted(live)[0])
    a_host = host_of(owner_of(src))
    others = [i for i in range(1, HOSTS + 1) if i != a_host]
    out = run(src, key, "echo moved > /root/mark; setsid sleep 2000 </dev/null >/dev/null "
              "2>&1 & echo started")
    full = fill_all(key, live)
    st, status = stop_via(key, src, others[0], others[1])
    check(out.strip() == "started" and full and st == 204 and status == "stopped",
          "a stop through fh%d of a box on fh%d: into the store and let go, seen stopped "
          "through fh%d (%s)" % (others[0], a_host, others[1], status))
    if status != "stopped":
        return
    # the slot it freed on its host taken, one freed elsewhere: it can only wake there
    st_fill, filler = api(1, key, "POST", "/v2/sandboxes/boxes",
                          {"name": "fill-a", "mem_bytes": MEM, "timeout": 60})
    fill_on = host_of(owner_of(filler)) if st_fill == 200 else 0
    freed = fill_on == a_host and free_slot_on(t, key, live, others[0])
    t0 = time.time()
    out = run(src, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 2000'")
    secs = time.time() - t0
    st, b = api(a_host, key, "GET", "/v2/sandboxes/boxes/%s" % src["name"])
    # which host runs it is not in the API (its dataplane_url stays): the hosts' logs say
    stopped_on = [i for i in range(1, HOSTS + 1)
                  if "box %s: stopped into the store" % src["id"] in t.log(i)]
    woken_on = [i for i in range(1, HOSTS + 1)
                if "box %s: woken here from the store" % src["id"] in t.log(i)]
    check(freed and out.startswith("moved") and len(out.split()) >= 2 and st == 200 and
          b.get("status") == "ready" and b.get("dataplane_url") == src["dataplane_url"] and
          stopped_on == [a_host] and woken_on == [others[0]],
          "the next execute through its dataplane_url (fh%d's) woke it in %.1f s: stopped on "
          "%s, woken on %s (the only room: fh%d; the slot it freed taken by a create: %s on "
          "fh%d), %s again, its dataplane_url unchanged, the file and the process there (%r)"
          % (a_host, secs, stopped_on, woken_on, others[0], st_fill, fill_on,
              b.get("status") if st == 200 else st, out[:60]))
    t.moved = (src, others[0])


def stop_race(t, key, live):
    """Calls that reach a box while its stop pushes it into the store wait, then go on to its
    wake: an execute at its dataplane_url (its host's), one through another host, a get by
    name through a third."""
    name = sorted(live)[0]
    box = live[name]
    home = host_of(owner_of(box))
    others = [i for i in range(1, HOSTS + 1) if i != home]
    first = run(box, key, "echo raced > /root/race; echo ok")
    st, _ = api(home, key, "POST", "/v2/sandboxes/boxes/%s/stop" % name)
    res = {}

    def one(what, fn):
        t0 = time.time()
        res[what] = (fn(), time.time() - t0)

    calls = [("execute", lambda: run(box, key, "cat /root/race")),
             ("via fh%d" % others[0], lambda: run(box, key, "cat /root/race", via=others[0])),
             ("get via fh%d" % others[1],
              lambda: api(others[1], key, "GET", "/v2/sandboxes/boxes/%s" % name)[0])]
    threads = [threading.Thread(target=one, args=c) for c in calls]
    for th in threads:
        th.start()
        time.sleep(0.2)
    for th in threads:
        th.join(400)
    stopped = "box %s: stopped into the store" % box["id"] in t.log(home)
    woken = [i for i in range(1, HOSTS + 1)
             if "box %s: woken here from the store" % box["id"] in t.log(i)]
    ok = {w: r[0] for w, r in res.items()}
    check(first.strip() == "ok" and st == 204 and stopped and len(woken) == 1 and
          ok.get("execute") == "raced\n" and ok.get("via fh%d" % others[0]) == "raced\n" and
          ok.get("get via fh%d" % others[1]) == 200,
          "calls made during a stop into the store (through fh%d): parked, then on to the "
          "wake (on fh%s): %s" % (home, woken, "; ".join(
              "%s: %r in %.1f s" % (w, r[0], r[1]) for w, r in sorted(res.items()))))


def stop_delete(t, key, live):
    """A box deleted (through another host) while its stop pushes it into the store: the
    delete answered at once; once the stop is over the box is gone through every host (not
    woken, not listed), and its name free for another box."""
    # a box of the host the drain empties next if it has one (its others are deleted there
    # anyway), else of any host; never the moved box (the drain moves it again)
    keep = [t.moved[0]["name"]] if getattr(t, "moved", None) else []
    hosts = ([t.moved[1]] if getattr(t, "moved", None) else []) + list(range(1, HOSTS + 1))
    x, name = next(((h, n) for h in hosts for n in boxes_on(t, h)
                    if n in live and n not in keep), (0, None))
    if name is None:
        check(False, "a delete during a stop: no box to try it with")
        return
    box = live.pop(name)
    via = 1 + x % HOSTS
    # (what the hosts' logs said before: the box may have been stopped and woken already)
    before = {i: len(t.log(i)) for i in range(1, HOSTS + 1)}

    def said(i):
        return t.log(i)[before[i]:]

    st_stop, _ = api(x, key, "POST", "/v2/sandboxes/boxes/%s/stop" % name)
    t0 = time.time()
    st_del, _ = api(via, key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
    del_s = time.time() - t0
    # the stop over: the box deleted on its way (either side of its release), or (had the
    # push been done before the delete came) let go and then deleted as a released box
    lines = ("box %s: deleted as asked during its stop into the store" % box["id"],
             "box %s: stopped into the store" % box["id"])
    deadline = time.time() + 300
    while time.time() < deadline and not any(ln in said(x) for ln in lines):
        time.sleep(1)
    how = next((ln.split(": ", 1)[1] for ln in lines if ln in said(x)), "no word")
    deadline = time.time() + 15  # (another host's list follows the fleet's records)
    while True:
        gets = [api(i, key, "GET", "/v2/sandboxes/boxes/%s" % name)[0]
                for i in range(1, HOSTS + 1)]
        st_l, lst = api(via, key, "GET", "/v2/sandboxes/boxes")
        listed = st_l != 200 or name in [b.get("name") for b in lst.get("sandboxes", [])]
        if (gets == [404] * HOSTS and not listed) or time.time() > deadline:
            break
        time.sleep(1)
    done = how != "no word"
    st_new, new = api(via, key, "POST", "/v2/sandboxes/boxes",
                      {"name": name, "mem_bytes": MEM, "timeout": 120})
    woken = [i for i in range(1, HOSTS + 1)
             if "box %s: woken here from the store" % box["id"] in said(i)]
    # its state (the manifest the stop pushed) leaves the store once no host holds it
    state = "w/team/m/box-%s" % box["id"]
    deadline = time.time() + 30
    while any(True for _ in swift_objects(t.a.swift_dir, state)) and time.time() < deadline:
        time.sleep(1)
    kept = any(True for _ in swift_objects(t.a.swift_dir, state))
    check(st_stop == 204 and st_del == 204 and done and gets == [404] * HOSTS and not listed and
          not woken and st_new == 200 and new.get("id") != box["id"] and not kept,
          "a delete through fh%d during a stop into the store on fh%d: %d in %.1f s (the stop "
          "%d); once the stop was over (%s) the box gone: gets %s, listed %s, woken on %s, its "
          "state in the store %s; its name taken again by a new box: %d" % (
              via, x, st_del, del_s, st_stop, how, gets, listed, woken,
              "kept" if kept else "deleted", st_new))
    if st_new == 200:
        live[name] = new


def transfer_argv(t):
    """sandbox-transfer beside this sandboxd's build, run as sandboxd is (through the loader
    and libraries api.sh copied in, where the emulated host has none of its own)."""
    sd = t.a.sandboxd[-1]
    prog = os.path.join(os.path.dirname(os.path.dirname(sd)), "tools", "transfer",
                        "sandbox-transfer")
    wrapper = os.path.join(t.work, "sandbox-transfer")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (" ".join(t.a.sandboxd[:-1]), prog))
    os.chmod(wrapper, 0o755)
    return wrapper


def hostile_imports(t, key, via):
    """What a pushing client may not send: a manifest with a proxy file, one naming a chunk
    never sent, one with a recipe (a chunk made of others: store/chunk_patch.c), a chunk whose
    bytes are not its name's."""
    import hashlib
    data = b"x" * 4096
    good = hashlib.sha256(data).hexdigest()
    r = urllib.request.Request("http://%s.%d:%d/v2/sandboxes/chunks/%s" % (
        NET, 10 + via, API_PORT, "1" * 64), data=data, method="PUT",
        headers={"X-Api-Key": key, "Content-Type": "application/octet-stream"})
    try:
        st_wrong = urllib.request.urlopen(r, timeout=60).status
    except urllib.error.HTTPError as e:
        st_wrong = e.code

    def manifest(files, recipe=False):
        text = "sandbox-manifest 1\ngeneration 1\nchunk_size 4096\n"
        for name in files:
            text += "file %s 4096 1 1\n0 4096\n%s\n" % (name, good)
        if recipe:
            text += "recipe %s %s %s\n" % (good, "1" * 64, "2" * 64)
        return (text + "end\n").encode()

    results = []
    for files, recipe in ((["state.fdt", "memory", "meta.yaml", "net.credentials"], False),
                          (["state.fdt", "memory", "meta.yaml"], False),
                          (["state.fdt", "memory", "meta.yaml"], True)):
        r = urllib.request.Request("http://%s.%d:%d/v2/sandboxes/imports?name=hostile" % (
            NET, 10 + via, API_PORT), data=manifest(files, recipe), method="POST",
            headers={"X-Api-Key": key, "Content-Type": "text/plain"})
        try:
            with urllib.request.urlopen(r, timeout=60) as resp:
                results.append((resp.status, resp.read()[:200]))
        except urllib.error.HTTPError as e:
            results.append((e.code, e.read()[:200]))
    st_gone, _ = api(via, key, "GET", "/v2/sandboxes/boxes/hostile")
    check(st_wrong == 400 and results[0][0] == 400 and b"net.credentials" in results[0][1] and
          results[1][0] == 400 and b"was not sent" in results[1][1] and
          results[2][0] == 400 and b"recipes" in results[2][1] and st_gone == 404,
          "hostile pushes refused: a chunk not of its name %d, a manifest with a proxy file "
          "%d %r, one naming a chunk never sent %d %r, one with a recipe %d %r; no box made "
          "(%d)" % (st_wrong, results[0][0], results[0][1][:90], results[1][0],
                    results[1][1][:90], results[2][0], results[2][1][:90], st_gone))


def push_pull(t, team_key, live):
    """sandboxctl push of a local sandbox to the fleet and pull back: its files and
    processes survive both ways; the second way through another host. In a workspace of its
    own (the corruption check damaged the team's chunks, which share the image's bytes)."""
    alive = [i for i in range(1, HOSTS + 1) if i != getattr(t, "killed", 0)]
    key = t.key("laptop")
    wait_up(key, alive)
    hostile_imports(t, key, alive[0])
    for name in list(live)[:1]:  # room for it
        api(alive[0], team_key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
        live.pop(name, None)
    time.sleep(3)
    local = os.path.join(t.work, "local")
    os.makedirs(local)
    os.symlink(t.a.images, os.path.join(local, "images"))
    env = dict(os.environ, SANDBOX_HOME=local, SANDBOX_API_KEY=key,
               SANDBOX_TRANSFER=transfer_argv(t))

    def ctl(*args, timeout=600):
        p = subprocess.run(t.a.ctl + list(args), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout.strip()

    url = "http://%s.%d:%d" % (NET, 10 + alive[0], API_PORT)
    rc_c, out_c = ctl("create", "--name", "laptop", "--image", "busybox", "--memory", "128")
    rc_e, out_e = ctl("exec", "laptop", "--", "sh", "-c",
                      "echo from-the-laptop > /root/pushed; "
                      "setsid sleep 3000 </dev/null >/dev/null 2>&1 & echo ok")
    t0 = time.time()
    rc_p, out_p = ctl("push", "laptop", url, "--name", "laptop")
    push_s = time.time() - t0
    rc_ls, out_ls = ctl("ls")
    st, box = api(alive[-1], key, "GET", "/v2/sandboxes/boxes/laptop")
    # (busybox: no pgrep; the process counted in ps)
    there = run(box, key, "cat /root/pushed; ps | grep -c '[s]leep 3000'; "
                "echo from-the-fleet > /root/back") if st == 200 else "(%s)" % st
    check(rc_c == 0 and rc_e == 0 and out_e.endswith("ok") and rc_p == 0 and
          "laptop" not in out_ls and there.startswith("from-the-laptop\n1"),
          "sandboxctl push of a local sandbox to the fleet through fh%d in %.1f s (%s): its file "
          "and its process there (%r); the local one gone (%s)%s" % (
              alive[0], push_s, out_p.splitlines()[-1][:300] if out_p else "", there[:80],
              "yes" if "laptop" not in out_ls else out_ls[-200:],
              "" if rc_c == 0 and rc_e == 0 else "; create %d %r, exec %d %r" % (
                  rc_c, out_c[-300:], rc_e, out_e[-200:])))
    url2 = "http://%s.%d:%d" % (NET, 10 + alive[-1], API_PORT)
    t0 = time.time()
    rc_pl, out_pl = ctl("pull", "laptop", url2, "--as", "laptop2")
    pull_s = time.time() - t0
    rc_x, out_x = ctl("exec", "laptop2", "--", "sh", "-c",
                      "cat /root/pushed /root/back; ps | grep -c '[s]leep 3000'")
    st_gone, _ = api(alive[0], key, "GET", "/v2/sandboxes/boxes/laptop")
    check(rc_pl == 0 and rc_x == 0 and
          out_x.startswith("from-the-laptop\nfrom-the-fleet\n1") and st_gone == 404,
          "sandboxctl pull of it back through fh%d in %.1f s (%s): both files and the process "
          "here (%r); the fleet's deleted (%d)" % (
              alive[-1], pull_s, out_pl.splitlines()[-1][:160] if out_pl else "",
              out_x[:120], st_gone))
    ctl("rm", "-f", "laptop2")


def collect(t, key, live, workspace, via):
    """`sandboxd gc` of the workspace's chunks (grace 0) through fh`via`: a capture of a
    running box deleted first (its manifest leaves the store with its record, and with it the
    chunks only it named); a dry run says what the run then deletes, a run again finds nothing;
    every restore after (drains, moves, a lost host's boxes, checkpoints, another capture's)
    is of what it kept."""
    def gc(*extra):
        argv, env = t.sandboxd(via, "gc", workspace, "--grace-s", "0", *extra,
                               "--operator", "127.0.0.1:8381")
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=900)
        try:
            return p.returncode, json.loads(p.stdout.strip() or "{}")
        except ValueError:
            return p.returncode, {"raw": p.stdout[-300:]}

    src = live[sorted(live)[-1]]
    run(src, key, "head -c 4000000 /dev/urandom > /root/noise; echo ok")
    st, snap = api(via, key, "POST", "/v2/sandboxes/boxes/%s/snapshot" % src["name"],
                   {"name": "to-collect"})
    deadline = time.time() + 300
    while st == 200 and isinstance(snap, dict) and time.time() < deadline:
        st, snap = api(via, key, "GET", "/v2/sandboxes/snapshots/%s" % snap["id"])
        if st != 200 or snap.get("status") != "building":
            break
        time.sleep(1)
    ready = st == 200 and isinstance(snap, dict) and snap.get("status") == "ready"
    st_del = api(via, key, "DELETE", "/v2/sandboxes/snapshots/%s" % snap["id"])[0] \
        if ready else 0
    t0 = time.time()
    rc_d, dry = gc("--dry-run")
    rc, rep = gc()
    secs = time.time() - t0
    rc_again, again = gc()
    check(ready and st_del in (200, 204) and rc_d == 0 and rc == 0 and rc_again == 0 and
          dry.get("dry_run") is True and rep.get("manifests", 0) > 0 and
          rep.get("deleted", 0) >= dry.get("deleted", 0) > 0 and again.get("deleted") == 0,
          "sandboxd gc %s through fh%d (grace 0) after a capture's delete (%d): a dry run and "
          "a run in %.1f s: %s manifests, %s chunks, %s deleted (%s bytes; the dry run said %s),"
          " %s kept (%s bytes); again: %s deleted" % (
              workspace, via, st_del, secs, rep.get("manifests"), rep.get("chunks"),
              rep.get("deleted"), rep.get("deleted_bytes"), dry.get("deleted"),
              rep.get("kept"), rep.get("kept_bytes"), again.get("deleted")))


def drain(t, key, live):
    """`sandboxd drain` on one host: its boxes go into the store (seen stopped), and it takes
    no more creates."""
    # the host the moved box woke on (moves): the drain stops it a second time
    x = t.moved[1] if getattr(t, "moved", None) else host_of(owner_of(live[sorted(live)[0]]))
    # all but two of its boxes deleted first: a drain of two shows what one of four would,
    # in half the pushes (the moved box stays: second_move wakes it)
    keep = [t.moved[0]["name"]] if getattr(t, "moved", None) else []
    extra = [n for n in boxes_on(t, x) if n not in keep]
    for n in extra[:max(0, len(extra) + len(keep) - 2)]:
        api(x, key, "DELETE", "/v2/sandboxes/boxes/%s" % n)
        live.pop(n, None)
    time.sleep(1)
    mine = boxes_on(t, x)  # (by its own records: a box's dataplane_url names its first host)
    argv, env = t.sandboxd(x, "drain", "--operator", "127.0.0.1:8381")
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline, stopped = time.time() + 300, 0
    while time.time() < deadline:
        stopped = sum(api(1 + x % HOSTS, key, "GET", "/v2/sandboxes/boxes/%s" % n)[1]
                      .get("status") == "stopped" for n in mine)
        if stopped == len(mine):
            break
        time.sleep(2)
    st, b = api(x, key, "POST", "/v2/sandboxes/boxes",
                {"name": "after-drain", "mem_bytes": MEM, "timeout": 30})
    where = host_of(owner_of(b)) if st == 200 else 0
    check(p.returncode == 0 and len(mine) > 0 and stopped == len(mine) and
          (st != 200 or where != x),
          "sandboxd drain on fh%d (%s): its %d boxes stopped into the store (%d seen stopped); "
          "a create through it after: %d on fh%d (not fh%d)" % (
              x, p.stdout.strip()[:120], len(mine), stopped, st, where, x))
    for n in mine:
        live.pop(n, None)
    t.drained = x
    if getattr(t, "moved", None):
        second_move(t, key, live, x)


def second_move(t, key, live, x):
    """The box moved once (moves), stopped again by the drain: its snapshot's disk stacks on
    what it was woken from, and it still wakes on another host, with its file and process."""
    src = t.moved[0]
    y = next(i for i in range(1, HOSTS + 1) if i != x)
    freed = free_slot_on(t, key, live, y)
    t0 = time.time()
    out = run(src, key, "cat /root/mark; pgrep -x sleep || ps | grep -c '[s]leep 2000'", via=y)
    secs = time.time() - t0
    woken = [i for i in range(1, HOSTS + 1)
             if "box %s: woken here from the store (generation 2)" % src["id"] in t.log(i)]
    check(freed and out.startswith("moved") and len(out.split()) >= 2 and len(woken) == 1 and
          woken[0] != x,
          "the moved box, stopped again by the drain of fh%d, woke (generation 2) on fh%s in "
          "%.1f s: the file and the process there (%r)" % (x, woken, secs, out[:60]))


def host_failure(t, key, live):
    """A host's sandboxd and a NATS node killed (-9): the API answers from the others, and a
    box that host had stopped into the store wakes elsewhere."""
    drained = getattr(t, "drained", 0)
    victim = live.pop(next(n for n in sorted(live)
                           if host_of(owner_of(live[n])) != drained))
    x = host_of(owner_of(victim))
    # the other hosts; the one with room last (a drained host takes nothing)
    others = sorted((i for i in range(1, HOSTS + 1) if i != x), key=lambda i: i != drained)
    out = run(victim, key, "echo before-the-loss > /root/mark; echo ok")
    st, status = stop_via(key, victim, others[0], others[1])
    ck = checkpointed_box(t, x)
    # room on the hosts that stay: one of their boxes goes
    freed = free_slot_on(t, key, live, others[1])
    vmms = t.kill_host(x)
    t.killed = x
    t.kill_nats(1)
    t0, answers = time.time(), []
    for i in others:
        st_l, lst = api(i, key, "GET", "/v2/sandboxes/boxes", timeout=30)
        answers.append(st_l)
    secs_list = time.time() - t0
    t0 = time.time()
    woke = run(victim, key, "cat /root/mark", via=others[0])  # (its own host is gone)
    secs = time.time() - t0
    woken_on = [i for i in others
                if "box %s: woken here from the store" % victim["id"] in t.log(i)]
    check(out.strip() == "ok" and status == "stopped" and freed and vmms > 0 and
          answers == [200] * len(others) and woke.startswith("before-the-loss") and
          len(woken_on) == 1,
          "fh%d's power lost (its sandboxd and its %d VMMs and proxies killed -9) and a NATS "
          "node killed: lists through the others %s in %.1f s; the box fh%d had stopped woke "
          "on fh%s in %.1f s through fh%d (%r)" % (
              x, vmms, answers, secs_list, x, woken_on, secs, others[0], woke[:200]))
    lost_boxes(t, key, live, x, others)
    if ck:
        checkpoint_woken(t, ck, x, others, victim, key)


CK_WORKSPACE = "ckpt"


def checkpointed_box(t, x):
    """A box of a workspace that asked for checkpoints every 10 s, made on host x (the only
    host with room: its stopped box's slot), with a file and a background process, once its
    first checkpoint is in the store; then checkpoints are turned off and a file is written
    after it. (key, box) or None."""
    ckey = t.key(CK_WORKSPACE)
    wait_up(ckey)
    t.quota(CK_WORKSPACE, "checkpoint_s=10")
    st, ck = api(x, ckey, "POST", "/v2/sandboxes/boxes",
                 {"name": "ck", "mem_bytes": MEM, "timeout": 240})
    if st != 200 or not isinstance(ck, dict) or host_of(owner_of(ck)) != x:
        check(False, "a box of workspace %s on fh%d for its checkpoint: %s %.200s" % (
            CK_WORKSPACE, x, st, ck))
        return None
    out = run(ck, ckey, "echo at-the-checkpoint > /root/ck; sleep 3000 </dev/null >/dev/null "
              "2>&1 & echo ok")
    t0, line = time.time(), None
    want = "box %s: checkpoint in the store (generation " % ck["id"]
    while time.time() - t0 < 240 and not line:
        line = next((ln for ln in t.log(x).splitlines() if want in ln), None)
        time.sleep(1)
    t.quota(CK_WORKSPACE, "checkpoint_s=0")  # (the next one would hold what follows)
    after = run(ck, ckey, "echo after > /root/after-ck; echo ok")
    check(out.strip() == "ok" and line is not None and after.strip() == "ok",
          "a box of a workspace with checkpoint_s=10 on fh%d: %s after %.1f s" % (
              x, line.split("sandboxd: ", 1)[-1] if line else "no checkpoint", time.time() - t0))
    time.sleep(3)  # (its record, naming the checkpoint, put at the host's next tick)
    return (ckey, ck) if line else None


def checkpoint_woken(t, ck, x, others, victim, key):
    """The checkpointed box of lost host x: shown stopped (its checkpoint named) through the
    others, then a call wakes it elsewhere from its checkpoint: the file and process from
    before it, not the file written after."""
    ckey, box = ck
    t0, st, b = time.time(), 0, {}
    while time.time() - t0 < 90:
        st, b = api(others[0], ckey, "GET", "/v2/sandboxes/boxes/ck")
        if st == 200 and b.get("status") == "stopped":
            break
        time.sleep(2)
    secs = time.time() - t0
    msg = (b.get("status_message") or "") if isinstance(b, dict) else ""
    api(others[0], key, "DELETE", "/v2/sandboxes/boxes/%s" % victim["name"])  # (its slot)
    time.sleep(3)
    t1 = time.time()
    out = run(box, ckey, "cat /root/ck; ls /root/after-ck 2>&1 | grep -c 'No such'; "
              "ps | grep -c '[s]leep 3000'", via=others[0])
    woken_on = [i for i in others if "box %s: woken here from the store" % box["id"] in t.log(i)]
    check(st == 200 and b.get("status") == "stopped" and "checkpoint" in msg and
          out.split() == ["at-the-checkpoint", "1", "1"] and len(woken_on) == 1,
          "the checkpointed box of lost fh%d: stopped through fh%d %.1f s after the lost "
          "boxes (%r); woken on fh%s in %.1f s: its file and process from the checkpoint, "
          "not the file after (%r)" % (x, others[0], secs, msg[:120], woken_on,
                                       time.time() - t1, out[:200]))


def lost_boxes(t, key, live, x, others):
    """The boxes the lost host ran: once its beats have lapsed (20 s), a get and a list through
    the others show them failed, naming the host; a delete frees the name."""
    names = boxes_on(t, x)  # (its records stay on its disk, as a machine's after a power cut)
    if not names:
        check(False, "fh%d ran no box when it was lost" % x)
        return
    name = names[0]
    t0, b, st = time.time(), {}, 0
    while time.time() - t0 < 90:
        st, b = api(others[0], key, "GET", "/v2/sandboxes/boxes/%s" % name)
        if st == 200 and b.get("status") == "failed":
            break
        time.sleep(2)
    secs = time.time() - t0
    st_l, lst = api(others[1], key, "GET", "/v2/sandboxes/boxes")
    listed = [x2.get("status") for x2 in lst.get("sandboxes", []) if x2.get("name") == name] \
        if st_l == 200 else []
    st_x, _ = api(others[1], key, "POST", "/v2/sandboxes/boxes/%s/stop" % name)
    st_d, _ = api(others[1], key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
    st_g, _ = api(others[0], key, "GET", "/v2/sandboxes/boxes/%s" % name)
    live.pop(name, None)
    msg = b.get("status_message") or "" if isinstance(b, dict) else ""
    check(st == 200 and b.get("status") == "failed" and "fh%d" % x in msg and
          listed == ["failed"] and st_x == 400 and st_d == 204 and st_g == 404,
          "a box fh%d ran, its host lost: failed through fh%d after %.1f s more (%r), listed "
          "failed through fh%d (%s); a stop 400 (%d), a delete 204 (%d), then 404 (%d)" % (
              x, others[0], secs, msg[:120], others[1], listed, st_x, st_d, st_g))
