#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench fleet's restore figures (docs/benchmarks.md, "The fleet"), on the fleet-api topology
(tests/fleet/api_checks.py's: three hosts in network namespaces, a three-node NATS cluster,
Swift with its S3 API), where Linux guests boot (tools/bench/fleet.sh routes it):

  restore_local_ms   a create from a snapshot on the host that captured it (its lifecycle
                     snapshot there), from the API's POST to the first answered execute
  restore_eager_ms   the same on a host that never saw it: every chunk pulled from the store
                     and checked, then restored (medians of ROUNDS interleaved pairs)
  second_snapshot_ratio  the bytes a second capture of a box uploads after 1 MiB written in
                     it, over the first capture's (memory and disk, chunk size stated)

    fleet_restore.py --images DIR --bin DIR --ctl SANDBOXCTL --swift-dir DIR -- SANDBOXD...

Last line: fleet restore_local_ms= restore_eager_ms= second_snapshot_ratio= first_kib=
second_kib= chunk_kib= rounds=
"""
import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "fleet"))
import api_checks as ac  # noqa: E402

ROUNDS = 3
CHUNK_KIB = 256


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
    t = ac.Topology(a)
    try:
        t.up()
        t.swift()
        key = t.key("bench")
        for i in range(1, ac.HOSTS + 1):
            t.serve(i)
        ac.wait_up(key)
        st, src = ac.api(1, key, "POST", "/v2/sandboxes/boxes",
                         {"name": "src", "mem_bytes": ac.MEM, "timeout": 300})
        if st != 200:
            raise RuntimeError("the source box: %s %s" % (st, src))
        here = ac.host_of(ac.owner_of(src))
        ac.run(src, key, "echo first > /root/f")
        s1, first = capture(t, key, src, "bench-1")
        ac.run(src, key, "dd if=/dev/urandom of=/root/blob bs=1024 count=1024 2>/dev/null; "
               "sync; echo ok")
        s2, second = capture(t, key, src, "bench-2")
        live = {"src": src}
        ac.fill_all(key, live)  # every slot taken: a restore goes where one is freed
        local, eager = [], []
        other = 1 + here % ac.HOSTS
        pulled = os.path.join(t.home(other), "snapshots", "api-" + s1.replace("-", ""))
        for r in range(ROUNDS):
            for want, out in ((here, local), (other, eager)):
                pool = {n: b for n, b in live.items() if n != "src"}
                ac.free_slot_on(t, key, pool, want, keep=("src",))  # (pops the one it deleted)
                live = dict(pool, src=src)
                ms, got, b = timed_restore(key, s1, "r%d-%d" % (r, want))
                if got != want:
                    raise RuntimeError("restore landed on fh%d, not fh%d" % (got, want))
                out.append(ms)
                live[b["name"]] = b
            # the other host's pulled copy goes: the next round there pulls afresh (eager),
            # as a host that never saw the snapshot would
            ac.sh("rm", "-rf", pulled)
            cache = os.path.join(t.home(other), "service", "chunk-cache")  # (its chunks too)
            for f in os.listdir(cache) if os.path.isdir(cache) else []:
                os.unlink(os.path.join(cache, f))
        ac.say("restore_local rounds (ms): %s" % " ".join("%.0f" % x for x in local))
        ac.say("restore_eager rounds (ms): %s" % " ".join("%.0f" % x for x in eager))
        print("fleet restore_local_ms=%.0f restore_eager_ms=%.0f second_snapshot_ratio=%.4f "
              "first_kib=%d second_kib=%d chunk_kib=%d rounds=%d" % (
                  statistics.median(local), statistics.median(eager), second / first,
                  first >> 10, second >> 10, CHUNK_KIB, ROUNDS), flush=True)
        return 0
    except Exception as e:
        ac.say("bench failed: %s" % e)
        t.logs()
        return 1
    finally:
        t.down()


if __name__ == "__main__":
    sys.exit(main())
