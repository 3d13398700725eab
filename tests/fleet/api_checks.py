#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fleet's API on real guests (docs/fleet.md, "The service in a fleet"), on the topology of
topology.py (three hosts as network namespaces, a three-node NATS cluster, Swift's S3 API),
made and removed here. Run where Linux guests boot (api.sh routes it).

    api_checks.py --images DIR --bin DIR --ctl SANDBOXCTL [--swift-dir DIR] -- SANDBOXD...

Checks (each says what it found), on one topology:
  - a key made once with `keys create --fleet` works on every host;
  - the LangSmith JS client's scenario (tests/service/scenario.mjs) through one host;
  - 12 creates through the three hosts' APIs, two at a time: all ready, no host over its 4
    slots, and each sandbox answers an execute at its dataplane_url;
  - a 13th create waits, then gets the API's unschedulable error (503 Unschedulable);
  - every box is found by name through every host (a call for another host's box runs there),
    and a list through any host holds all 12;
  - a delete through a host that does not own the box frees its name and its slot: a create
    under the same name is ready again;
  - a rename through a host that does not own the box: found by the new name through every
    host, not by the old; a second box cannot take the name (409);
  - with the object store, store_checks.py's: snapshots across hosts, locality, corruption,
    moves, two wakes racing, drain, a host's power lost, checkpoints, push and pull.
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

from topology import (
    API_PORT, HOSTS, MEM, NET, SLOTS, Topology, WORKSPACE, api, call, check, failures,
    owner_of, say, wait_up)
from store_checks import (
    collect, corruption, drain, host_failure, locality, moves, push_pull, snapshots, stop_delete,
    stop_race)


def node_scenario(t):
    """The LangSmith JS client, unchanged (tests/service/scenario.mjs, the service issue's
    scenario), against the fleet through one host (fh2): its sandboxes placed on all three,
    their dataplanes through their owners. Workspaces node1, and node2 with a fleet-wide quota
    of one sandbox."""
    node, modules = os.environ.get("FLEET_NODE"), os.environ.get("FLEET_NODE_MODULES")
    if not node or not modules:
        check(False, "the Node scenario: no node or LangSmith client given (FLEET_NODE, "
              "FLEET_NODE_MODULES: tools/dev setup fetches them)")
        return
    k1, k2 = t.key("node1"), t.key("node2")
    argv, env = t.sandboxd(1, "quota", "set", "node2", "sandboxes=1", "--fleet", t.servers,
                           ns=False)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    wait_up(k1)
    wait_up(k2)
    here = os.path.dirname(os.path.abspath(__file__))
    scenario = os.path.join(here, "..", "service", "scenario.mjs")
    t0 = time.time()
    p = subprocess.run(
        [node, scenario], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=900, env=dict(os.environ, SANDBOXD_URL="http://%s.12:%d" % (NET, API_PORT),
                              SANDBOXD_KEY=k1, SANDBOXD_KEY2=k2, SCENARIO_CHECK_TIMEOUT_S="300",
                              SCENARIO_NODE_MODULES=modules))
    for k in (k1, k2):  # (what it left: the slots are the checks' after it)
        st, lst = api(1, k, "GET", "/v2/sandboxes/boxes")
        for b in lst.get("sandboxes", []) if st == 200 else []:
            api(1, k, "DELETE", "/v2/sandboxes/boxes/%s" % b["id"])
    lines = p.stdout.splitlines()
    oks = [ln for ln in lines if ln.startswith("ok ")]
    bad = [ln for ln in lines if ln.startswith("FAIL")]
    check(p.returncode == 0 and oks and not bad,
          "the LangSmith JS client's scenario through fh2: %d checks ok in %.0f s%s" % (
              len(oks), time.time() - t0,
              "" if p.returncode == 0 and not bad else
              " (exit %d): %s" % (p.returncode, "\n  ".join((bad or lines[-20:])[:40]))))


def creates(key):
    results = {}
    lock = threading.Semaphore(2)

    def one(n):
        with lock:
            t0 = time.time()
            results[n] = api(n % HOSTS + 1, key, "POST", "/v2/sandboxes/boxes",
                             {"name": "f%d" % n, "mem_bytes": MEM, "timeout": 240}) + (
                time.time() - t0,)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(HOSTS * SLOTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def the_checks(t, key):
    """Every check but the Node scenario's, on a topology that is up."""
    res = creates(key)
    ready = {n: r[1] for n, r in res.items() if r[0] == 200 and isinstance(r[1], dict)
             and r[1].get("status") == "ready"}
    check(len(ready) == HOSTS * SLOTS,
          "%d of %d creates through the three hosts ready (%s)" % (
              len(ready), HOSTS * SLOTS,
              "; ".join("f%d: %s %.300s" % (n, r[0], r[1]) for n, r in res.items()
                        if n not in ready) or "seconds: " +
              " ".join("%.1f" % r[2] for r in res.values())))
    per = {}
    for b in ready.values():
        per[owner_of(b)] = per.get(owner_of(b), 0) + 1
    check(len(ready) > 0 and max(per.values()) <= SLOTS,
          "placement by capacity: boxes per host %s, none over %d slots" % (
              dict(sorted(per.items())), SLOTS))
    answered = 0
    for n, b in sorted(ready.items()):
        st, out = call(b["dataplane_url"] + "/execute", key, "POST",
                       {"command": "echo f%d on $(hostname)" % n, "timeout": 60})
        answered += st == 200 and isinstance(out, dict) and out.get("stdout", "").startswith(
            "f%d on" % n)
    check(answered == len(ready) > 0,
          "%d of %d sandboxes answer an execute at their dataplane_url" % (
              answered, len(ready)))

    t0 = time.time()
    st, body = api(1, key, "POST", "/v2/sandboxes/boxes",
                   {"name": "f-extra", "mem_bytes": MEM, "timeout": 8})
    err = body.get("detail", {}).get("error") if isinstance(body, dict) else None
    check(st == 503 and err == "Unschedulable",
          "a 13th create with every slot taken: %d %s after %.1f s (want 503 Unschedulable "
          "after its 8 s timeout)" % (st, err, time.time() - t0))

    found = 0
    for n in ready:
        for i in range(1, HOSTS + 1):
            st, b = api(i, key, "GET", "/v2/sandboxes/boxes/f%d" % n)
            found += st == 200 and b.get("id") == ready[n]["id"]
    check(found == len(ready) * HOSTS > 0,
          "%d of %d gets by name through every host find the box" % (
              found, len(ready) * HOSTS))
    st, lst = api(2, key, "GET", "/v2/sandboxes/boxes")
    names = sorted(b["name"] for b in lst.get("sandboxes", [])) if st == 200 else []
    check(len(names) == len(ready) and "f-extra" not in names,
          "a list through fh2 holds the %d boxes of all hosts (%d listed)" % (
              len(ready), len(names)))
    other = t.key("other")
    wait_up(other)  # (a new key reaches every host's copy within a tick)
    st_other, _ = api(1, other, "GET", "/v2/sandboxes/boxes/f0")
    check(st_other == 404, "another workspace's key gets 404 for f0 through fh1 (%d)" %
          st_other)

    if ready:
        n0 = sorted(ready)[0]
        b0 = ready[n0]
        via = next(i for i in range(1, HOSTS + 1) if "%s.%d" % (NET, 10 + i) != owner_of(b0))
        st, _ = api(via, key, "DELETE", "/v2/sandboxes/boxes/f%d" % n0)
        gone = st == 204
        deadline = time.time() + 60
        while gone and time.time() < deadline:
            st, _ = api(via, key, "GET", "/v2/sandboxes/boxes/f%d" % n0)
            if st == 404:
                break
            time.sleep(0.5)
        st2, again = api(3, key, "POST", "/v2/sandboxes/boxes",
                         {"name": "f%d" % n0, "mem_bytes": MEM, "timeout": 240})
        check(gone and st == 404 and st2 == 200 and again.get("status") == "ready",
              "a delete through fh%d (not the owner) frees the name and a slot: created "
              "again %d %s" % (via, st2, again.get("status") if isinstance(again, dict)
                               else again))
    if len(ready) > 1:
        n1 = sorted(ready)[1]
        via = next(i for i in range(1, HOSTS + 1)
                   if "%s.%d" % (NET, 10 + i) != owner_of(ready[n1]))
        st, b = api(via, key, "PATCH", "/v2/sandboxes/boxes/f%d" % n1, {"name": "moved-name"})
        st_taken, _ = api(via, key, "PATCH", "/v2/sandboxes/boxes/f%d" % sorted(ready)[2],
                          {"name": "moved-name"})
        by_new = [api(i, key, "GET", "/v2/sandboxes/boxes/moved-name")[0]
                  for i in range(1, HOSTS + 1)]
        by_old = api(via, key, "GET", "/v2/sandboxes/boxes/f%d" % n1)[0]
        check(st == 200 and b.get("name") == "moved-name" and st_taken == 409 and
              by_new == [200] * HOSTS and by_old == 404,
              "a rename through fh%d (not the owner): %d; the name again for another box: "
              "%d (want 409); found by the new name through each host %s, by the old %d" % (
                  via, st, st_taken, by_new, by_old))
    if t.store:
        # (the first two were deleted and renamed above)
        live = {b["name"]: b for n, b in ready.items()
                if n not in (sorted(ready)[0], sorted(ready)[1])}
        snapshots(t, key, live)
        if getattr(t, "snap", None):
            locality(t, key, live)
        moves(t, key, live)
        stop_race(t, key, live)
        stop_delete(t, key, live)
        collect(t, key, live, WORKSPACE, 2)
        drain(t, key, live)
        host_failure(t, key, live)
        if getattr(t, "snap", None):
            corruption(t, key, live)
        push_pull(t, key, live)
        pulls = [ln for i in range(1, HOSTS + 1) for ln in t.log(i).splitlines()
                 if ": pulled in " in ln or ": pulled but its memory in " in ln]
        hits = [int(m.group(1)) for m in (re.search(r"(\d+) from the cache", ln)
                                         for ln in pulls) if m]
        check(len(hits) == len(pulls) > 0 and max(hits) > 0,
              "the hosts' chunk caches: %d pulls, chunks from the cache %s" % (
                  len(pulls), hits))
        for i in range(1, HOSTS + 1):  # (the store's figures, for the record)
            for ln in t.log(i).splitlines():
                if ": in the store in " in ln or ": pulled" in ln or "memory in from" in ln:
                    say("fh%d: %s" % (i, ln.split("sandboxd: ", 1)[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", required=True)
    ap.add_argument("--bin", required=True, help="a directory with nats-server")
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--swift-dir", help="a directory with user xattrs: the object store's checks")
    ap.add_argument("sandboxd", nargs="+")
    a = ap.parse_args()
    a.ctl = [a.ctl]
    # FLEET_PART: "node" for the Node scenario only, "api" for every other check, else both
    # on the one topology (the scenario first: it removes what it made)
    part = os.environ.get("FLEET_PART", "")
    t = Topology(a)
    try:
        t.up()
        if a.swift_dir:
            t.swift()
        key = t.key(WORKSPACE)
        for i in range(1, HOSTS + 1):
            t.serve(i)
        wait_up(key)
        check(True, "one key made with `keys create --fleet` answers on fh1, fh2 and fh3")
        if part != "api":
            node_scenario(t)
        if part != "node":
            the_checks(t, key)
    except Exception as e:  # the topology failed: said, and the logs shown
        check(False, "the topology: %s" % e)
    finally:
        if failures:
            t.logs()
        t.down()
    say("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
