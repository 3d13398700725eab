#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench fleet's restore figures (docs/benchmarks.md, "The fleet"), on the fleet-api topology
(tests/fleet/topology.py's: three hosts in network namespaces, a three-node NATS cluster,
Swift with its S3 API), where Linux guests boot (tools/bench/fleet.sh routes it):

  (the source box a warm create: every host made one box first, warm_hosts)
  restore_local_ms   a create from a snapshot on the host that captured it (its lifecycle
                     snapshot there), from the API's POST to the first answered execute
  restore_eager_ms   the same on a host that never saw it: every chunk pulled from the store
                     and checked, then restored (sandboxd --restore-memory eager)
  restore_lazy_ms    the same on another such host restoring lazily (the default): all but
                     the memory pulled, the memory paged in through userfaultfd as the guest
                     touches it (medians of ROUNDS interleaved triples)
  lazy_fetched_ratio the memory's bytes fetched before the lazy restore's first answer over
                     all of its memory's (the host's log, median)
  second_snapshot_ratio  the bytes a second capture of a box uploads after 1 MiB written in
                     it, over the first capture's (memory and disk, chunk size stated). The
                     box (256 MiB) holds STATE_MIB of files in a tmpfs, written before its
                     first capture: a sandbox with some state, not a near-empty one (the
                     small box's first capture is ~18 MiB, of which the 1 MiB written, in its
                     page cache and on its disk, would be 11% by itself)

    fleet_restore.py --images DIR --bin DIR --ctl SANDBOXCTL --swift-dir DIR -- SANDBOXD...

Last line: fleet restore_local_ms= restore_eager_ms= restore_lazy_ms= lazy_fetched_ratio=
second_snapshot_ratio= first_kib= second_kib= state_mib= chunk_kib= rounds= lazy_hot_chunks=N/M
"""
import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "fleet"))
import topology as ac  # noqa: E402

ROUNDS = 3
CHUNK_KIB = 256
STATE_MIB = 128


def capture(t, key, box, name):
    """A capture of box through its own host, ready; (snapshot id, bytes it uploaded)."""
    st, snap = ac.api(1, key, "POST", "/v2/sandboxes/boxes/%s/snapshot" % box["name"],
                      {"name": name})
    if st != 200:
        raise RuntimeError("capture %s: %s %s" % (name, st, snap))
    deadline = time.time() + 600
    while time.time() < deadline:
        st, s = ac.api(1, key, "GET", "/v2/sandboxes/snapshots/%s" % snap["id"])
        if st == 200 and s.get("status") == "ready":
            break
        if st != 200 or s.get("status") == "failed":
            raise RuntimeError("capture %s: %s %s" % (name, st, s))
        time.sleep(1)
    host = ac.host_of(ac.owner_of(box))
    m = re.search(r"snapshot %s: in the store in \d+ ms: \d+ chunks up \((\d+) bytes\)" %
                  snap["id"], t.log(host))
    if not m:
        raise RuntimeError("capture %s: its upload is not in fh%d's log" % (name, host))
    return snap["id"], int(m.group(1))


def timed_restore(key, snap_id, name):
    """A create from snap_id to its first answered execute: (ms, its host)."""
    t0 = time.time()
    st, b = ac.api(1, key, "POST", "/v2/sandboxes/boxes",
                   {"name": name, "snapshot_id": snap_id, "mem_bytes": ac.MEM, "timeout": 300})
    if st != 200:
        raise RuntimeError("restore %s: %s %s" % (name, st, b))
    out = ac.run(b, key, "echo up")
    ms = (time.time() - t0) * 1000
    if out.strip() != "up":
        raise RuntimeError("restore %s: no answer (%r)" % (name, out))
    return ms, ac.host_of(ac.owner_of(b)), b


def lazy_ratio(t, box, host):
    """What of box's memory its lazy restore fetched before the first answer, over all of it
    (the host's log line once the rest is in: MiB, so the ratio is to about 1%)."""
    pat = re.compile(r"box %s: its memory in from the store in \d+ ms: (\d+) MiB .*, (\d+) "
                     r"MiB of it before its first answer" % re.escape(box["id"]))
    deadline = time.time() + 300
    while time.time() < deadline:
        m = pat.search(t.log(host))
        if m:
            return int(m.group(2)) / max(1, int(m.group(1)))
        time.sleep(1)
    raise RuntimeError("fh%d's log never said its lazy restore of %s ended" % (host, box["id"]))


def warm_hosts(t, key):
    """Every host made a box of the bench's options once (then deleted): a host's first create
    boots the image and leaves its ready snapshot, every later one restores from it, as
    almost every create in a running fleet does. The source box is then such a create, and
    its snapshot says which pages it touched since (docs/snapshots.md, touched-pages)."""
    made = {}
    for n in range(ac.HOSTS * ac.SLOTS):
        if len(set(made.values())) == ac.HOSTS:
            break
        st, b = ac.api(1, key, "POST", "/v2/sandboxes/boxes",
                       {"name": "warm-%d" % n, "mem_bytes": ac.MEM, "timeout": 300})
        if st != 200:
            raise RuntimeError("warming: %s %s" % (st, b))
        made[b["name"]] = ac.host_of(ac.owner_of(b))
    if len(set(made.values())) != ac.HOSTS:
        raise RuntimeError("warming: boxes made on %s only" % sorted(set(made.values())))
    for name in made:
        st, _ = ac.api(1, key, "DELETE", "/v2/sandboxes/boxes/%s" % name)
        if st != 204:
            raise RuntimeError("warming: the delete of %s: %s" % (name, st))
    time.sleep(3)  # the slots counted free at the hosts' next beats


def hot_chunks(t, snap_id, host):
    """The lazy pull's word on snap_id at host: (chunks read ahead first as its last run's,
    the memory's chunks), the last pull's."""
    m = re.findall(r"snapshot %s: pulled but its memory .*, (\d+) of its (\d+) chunks \(those "
                   r"its last run touched\)" % re.escape(snap_id), t.log(host))
    return (int(m[-1][0]), int(m[-1][1])) if m else (0, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--swift-dir", required=True)
    ap.add_argument("sandboxd", nargs="+")
    a = ap.parse_args()
    a.ctl = [a.ctl]
    ac.SLOTS = 2
    ac.WORKSPACE = "bench"
    t = ac.Topology(a)
    try:
        t.up()
        t.swift()
        key = t.key(ac.WORKSPACE)
        for i in range(1, ac.HOSTS + 1):
            t.serve(i)
        ac.wait_up(key)
        warm_hosts(t, key)
        # never stopped for idleness (0): the bench runs past the 10-minute default, and a
        # box stopped meanwhile frees a slot the rounds did not choose
        st, src = ac.api(1, key, "POST", "/v2/sandboxes/boxes",
                         {"name": "src", "mem_bytes": ac.MEM, "timeout": 300,
                          "idle_ttl_seconds": 0})
        if st != 200:
            raise RuntimeError("the source box: %s %s" % (st, src))
        here = ac.host_of(ac.owner_of(src))
        ac.run(src, key, "echo first > /root/f")
        s1, small = capture(t, key, src, "bench-1")
        # the second snapshot's figure: a box holding STATE_MIB of files, captured, 1 MiB
        # written, captured again through the same host (its first capture the parent)
        st, big = ac.api(1, key, "POST", "/v2/sandboxes/boxes",
                         {"name": "state", "mem_bytes": 256 << 20, "timeout": 300})
        if st != 200:
            raise RuntimeError("the state box: %s %s" % (st, big))
        out = ac.run(big, key, "mkdir -p /state && mount -t tmpfs -o size=%dm tmpfs /state && "
                     "dd if=/dev/urandom of=/state/data bs=1M count=%d 2>/dev/null && "
                     "echo ok" % (STATE_MIB + 16, STATE_MIB))
        if out.strip() != "ok":
            raise RuntimeError("the state box's files: %r" % out)
        _, first = capture(t, key, big, "state-1")
        ac.run(big, key, "dd if=/dev/urandom of=/root/blob bs=1024 count=1024 2>/dev/null; "
               "sync; echo ok")
        _, second = capture(t, key, big, "state-2")
        ac.say("second snapshot: %d bytes after the first's %d (a box of %d MiB of files; the "
               "small box's first capture: %d bytes)" % (second, first, STATE_MIB, small))
        st, _ = ac.api(1, key, "DELETE", "/v2/sandboxes/boxes/state")
        if st != 204:
            raise RuntimeError("the state box's delete: %s" % st)
        # the two other hosts: one restores eagerly (its sandboxd started again so), one
        # lazily
        lazy_host = 1 + here % ac.HOSTS
        other = 1 + lazy_host % ac.HOSTS
        t.kill_host(other)
        t.serve(other, ("--restore-memory", "eager"))
        ac.wait_up(key)
        live = {"src": src}
        ac.fill_all(key, live)  # every slot taken: a restore goes where one is freed
        local, eager, lazy, ratio, hot = [], [], [], [], []
        pulled = os.path.join(t.home(other), "snapshots", "api-" + s1.replace("-", ""))
        for r in range(ROUNDS):
            for want, out in ((here, local), (other, eager), (lazy_host, lazy)):
                pool = {n: b for n, b in live.items() if n != "src"}
                ac.free_slot_on(t, key, pool, want, keep=("src",))  # (pops the one it deleted)
                live = dict(pool, src=src)
                ms, got, b = timed_restore(key, s1, "r%d-%d" % (r, want))
                if got != want:
                    raise RuntimeError("restore landed on fh%d, not fh%d" % (got, want))
                out.append(ms)
                live[b["name"]] = b
                if want == lazy_host:
                    ratio.append(lazy_ratio(t, b, lazy_host))
                    hot.append(hot_chunks(t, s1, lazy_host))
            # the other hosts' pulled copy goes (the lazy one keeps none), and their chunk
            # caches: the next round there pulls afresh, as a host that never saw it would
            ac.sh("rm", "-rf", pulled)
            for h in (other, lazy_host):
                cache = os.path.join(t.home(h), "service", "chunk-cache")
                for f in os.listdir(cache) if os.path.isdir(cache) else []:
                    os.unlink(os.path.join(cache, f))
        ac.say("restore_local rounds (ms): %s" % " ".join("%.0f" % x for x in local))
        ac.say("restore_eager rounds (ms): %s" % " ".join("%.0f" % x for x in eager))
        ac.say("restore_lazy rounds (ms): %s; fetched before the first answer: %s" % (
            " ".join("%.0f" % x for x in lazy), " ".join("%.3f" % x for x in ratio)))
        ac.say("chunks its last run touched, read ahead first: %s" % " ".join(
            "%d of %d" % h for h in hot))
        print("fleet restore_local_ms=%.0f restore_eager_ms=%.0f restore_lazy_ms=%.0f "
              "lazy_fetched_ratio=%.3f second_snapshot_ratio=%.4f first_kib=%d second_kib=%d "
              "state_mib=%d chunk_kib=%d rounds=%d lazy_hot_chunks=%d/%d" % (
                  statistics.median(local), statistics.median(eager), statistics.median(lazy),
                  statistics.median(ratio), second / first, first >> 10, second >> 10,
                  STATE_MIB, CHUNK_KIB, ROUNDS, hot[-1][0], hot[-1][1]), flush=True)
        return 0
    except Exception as e:
        ac.say("bench failed: %r" % e)
        t.logs()
        return 1
    finally:
        t.down()


if __name__ == "__main__":
    sys.exit(main())
