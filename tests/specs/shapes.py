#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The worst shapes of job spec we know, each of at most 1 MiB, answered in bounded work.

Each shape (deep nesting of every kind of collection, long flow collections, many keys,
steps, anchors, aliases or directives, long scalars, lines and keys) is written to a scratch
directory and given to `sandboxctl run --check` from there, as tests/specs/check.sh does with
the golden files. Each must be accepted (exit 0) or refused (exit 2) with the message its
table row expects, and within a bound of work: under a second of CPU time (user + system,
the child's rusage), which a loaded machine does not inflate the way it does wall time, and
within a 10 s wall-clock timeout that only catches a hang. Before the bounds of
tools/jobspec/jobspec_shape.c, 200 KB of `[[[[...` took 40 s of CPU to be refused, 1 MiB
of it was killed after 60 s, and 1 MiB of anchors took 22.5 s (issue 27). Each shape's size,
status, CPU and wall time are printed, so a CI log keeps the figures.

usage: shapes.py SANDBOXCTL [--timeout S] [--write DIR] [NAME...]
  --timeout S  the wall-clock timeout per shape (default 10)
  --write DIR  only write the shapes into DIR (to time or profile them by hand)
  NAME...      only these shapes (default: all)
Exit status: 0 when every shape is answered as expected, 1 otherwise, 2 on bad usage.
"""
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

LIMIT = 1 << 20  # the largest spec sandboxctl reads (SPEC_MAX_LEN)
CPU_BUDGET_S = 1.0  # docs/jobspec.md: every spec answered within a second

STEP = "steps:\n  - run: a\n"


def fill(head, unit, tail=""):
    """head, then unit as many times as fits in LIMIT with tail, then tail."""
    n = (LIMIT - len(head) - len(tail)) // len(unit)
    return head + unit * n + tail


def nest(head, opening, middle, closing, tail="\n"):
    """head, then as many opening...closing pairs around middle as fit in LIMIT."""
    n = (LIMIT - len(head) - len(middle) - len(tail)) // (len(opening) + len(closing))
    return head + opening * n + middle + closing * n + tail


def numbered(head, item, tail=""):
    """head, then item % 0, item % 1, ... as many as fit in LIMIT with tail, then tail."""
    out, size, i = [head], len(head) + len(tail), 0
    while size + len(item % i) <= LIMIT:
        out.append(item % i)
        size += len(item % i)
        i += 1
    return "".join(out) + tail


def indented(head, line, last):
    """head, then `line` once per level from level 1, each indented one more space, and
    `last` one level deeper still, as many levels as fit in LIMIT."""
    out, depth, size = [head], 1, len(head)
    while size + 2 * (depth + 1) + len(line) + len(last) + 2 <= LIMIT:
        out.append(" " * depth + line + "\n")
        size += depth + len(line) + 1
        depth += 1
    return "".join(out) + " " * depth + last + "\n"


def anchors(n, name_len):
    """n anchored scalars with names of name_len characters (a shared prefix)."""
    return ", ".join("&%s x" % ("a" * (name_len - 6) + "%06d" % i) for i in range(n))


def fat_steps():
    """1000 steps (SPEC_MAX_STEPS) of ~1 KiB scripts: a large spec that is accepted."""
    per = (LIMIT - 16) // 1000
    step = "  - run: " + "x" * (per - 10) + "\n"
    return "steps:\n" + step * 1000


def env_per_step():
    """An env of 256 keys of 255 characters that differ only at their end (the duplicate
    check's worst case), given to each of 1000 steps by an alias."""
    keys = "".join("      %s: v\n" % ("K" * 249 + "%06d" % i) for i in range(256))
    return "steps:\n  - run: a\n    env: &e\n" + keys + "  - {run: a, env: *e}\n" * 999


def anchors_long_then_aliases():
    """255 anchors with 2 KiB names sharing all but their end, then aliases of the last one
    (each one looked up past all the others) to fill 1 MiB."""
    names = ["a" * 2042 + "%06d" % i for i in range(255)]
    head = STEP + "env: [" + ", ".join("&%s x" % n for n in names)
    alias = ", *" + names[-1]
    n = (LIMIT - len(head) - 2) // len(alias)
    return head + alias * n + "]\n"


def anchors_aliases_max():
    """The most anchors and aliases the bounds allow (256 and 4096), names of 230 characters
    that differ only at their end, every alias naming the last anchor (the longest lookup)."""
    names = ["a" * 224 + "%06d" % i for i in range(256)]
    return (STEP + "env: [" + ", ".join("&%s x" % n for n in names) + (", *" + names[-1]) * 4096
            + "]\n")


DEPTH = r"nesting deeper than 64 levels"
# name: (spec, accepted (exit 0) or refused (exit 2), regular expression on the output)
SHAPES = {
    # Deep nesting: libyaml's scanner keeps one simple-key slot per flow level and checks
    # them all at every token (quadratic), so flow nesting is refused as it is read.
    "flow-seq-deep": (nest(STEP + "env: ", "[", "", "]"), 2, DEPTH),
    "flow-map-deep": (nest(STEP + "env: ", "{a: ", "b", "}"), 2, DEPTH),
    "flow-mixed-deep": (nest(STEP + "env: ", "[{a: ", "b", "}]"), 2, DEPTH),
    "flow-seq-deep-lines": (nest(STEP + "env:\n", " [\n", "", " ]\n"), 2, DEPTH),
    "flow-seq-deep-unclosed": (fill(STEP + "env: ", "["), 2, DEPTH),
    "flow-key-deep": (nest(STEP + "env: ", "{[", "a", "]: b}"), 2, DEPTH),
    "block-map-deep": (indented(STEP + "env:\n", "a:", "a: b"), 2, DEPTH),
    "block-seq-deep": (indented("steps:\n", "-", "- run: a"), 2, DEPTH),
    "block-seq-compact": (fill("steps:\n  ", "- ", "run: a\n"), 2, DEPTH),
    "block-key-compact": (fill(STEP + "env:\n  ", "? ", "a\n"), 2, DEPTH),
    "step-env-deep": (nest("steps:\n  - run: a\n    env: {A: ", "[", "", "]", "}\n"), 2, DEPTH),
    "network-deep": (nest(STEP + "network: {allow: ", "[", "", "]", "}\n"), 2, DEPTH),
    # Long flow collections, many keys, many steps.
    "flow-seq-long": (fill(STEP + "env: [", "a, ", "a]\n"), 2, r"3:6: env: expected a mapping"),
    "flow-pairs-long": (fill(STEP + "env: [", "a: b, ", "a]\n"), 2, r"env: expected a mapping"),
    "flow-map-many-keys": (numbered(STEP + "env: {", "K%d: v, ", "K: v}\n"), 2,
                           r"env: at most 256 keys"),
    "env-many-keys": (numbered(STEP + "env:\n", "  K%d: v\n"), 2, r"env: at most 256 keys"),
    "top-many-keys": (numbered("", "k%d: v\n"), 2, r"job spec: at most 256 keys"),
    "steps-many": (fill("steps:\n", "  - run: a\n"), 2, r"steps: at most 1000 items"),
    "steps-flow-many": (fill("steps: [", "{run: a}, ", "{run: a}]\n"), 2,
                        r"steps: at most 1000 items"),
    "steps-1000-fat": (fat_steps(), 0, r"step 1000: step 1000"),
    "env-alias-per-step": (env_per_step(), 2, r"add up to more than 4 MiB"),
    "steps-env-256-each": (
        numbered("steps:\n", "  - {run: a, env: {" + ", ".join("K%d: v" % k for k in range(256))
                 + "}, name: s%d}\n"), 0, r"env: K255=v"),
    "env-256-keys-4k": (
        STEP + "env:\n" + "".join("  ? %s%06d\n  : v\n" % ("K" * 4000, i) for i in range(256)),
        2, r"4:5: env: 'K{40}' is not a variable name"),
    # Anchors and aliases: libyaml's loader checks each anchor against every earlier one,
    # and looks each alias up among them all.
    "alias-bomb": (
        "steps:\n  - &s {run: \"" + "x" * (LIMIT - 8100) + "\"}\n" + "  - *s\n" * 999, 2,
        r"2:14: the spec's strings add up to more than 4 MiB"),
    "anchors-many": (numbered(STEP + "env: [", "&a%d x, ", "x]\n"), 2, r"more than 256 anchors"),
    "aliases-many": (fill(STEP + "env: [&a x", ", *a", "]\n"), 2, r"more than 4096 aliases"),
    "anchors-long-aliases": (anchors_long_then_aliases(), 2, r"env: expected a mapping"),
    "anchors-aliases-max": (anchors_aliases_max(), 2, r"env: expected a mapping"),
    "anchors-257": (STEP + "env: [" + anchors(257, 8) + "]\n", 2, r"more than 256 anchors"),
    # Long scalars, lines and keys.
    "run-long-plain": (fill("steps:\n  - run: ", "x", "\n"), 0, r"run: x{400}"),
    "run-long-quoted": (fill("steps:\n  - run: \"", "\\t", "\"\n"), 0, r"run: "),
    "run-long-literal": (fill("steps:\n  - run: |\n", "      echo hi\n"), 0, r"run: echo hi"),
    "run-many-lines": (fill("steps:\n  - run:\n", "      x\n"), 0, r"run: x x x"),
    "comment-long-line": (fill("# ", "x", "\n" + STEP), 0, r"step 1: step 1"),
    "comments-many": (fill("", "#\n", STEP), 0, r"step 1: step 1"),
    "key-long": (fill("", "k", ": v\n" + STEP), 2, r"mapping values are not allowed"),
    "key-long-quoted": (fill("\"", "k", "\": v\n" + STEP), 2, r"mapping values are not allowed"),
    # Tags, directives, documents.
    "tags-many": (fill(STEP + "env: [", "!!str a, ", "a]\n"), 2, r"env: expected a mapping"),
    "tag-directives-many": (numbered("", "%%TAG !t%d! tag:x,2000:\n", "---\n" + STEP), 2,
                            r"more than 16 directives"),
    "documents-many": (fill(STEP, "---\n"), 0, r"step 1: step 1"),
    "documents-deep-second": (fill(STEP + "---\n", "["), 0, r"step 1: step 1"),
}


def run_shape(ctl, name, spec, timeout):
    """(exit status or None on timeout, output, CPU seconds, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        r = subprocess.run([ctl, "run", "--check", name + ".yaml"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        status, out = r.returncode, r.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        status, out = None, (e.stdout or b"").decode("utf-8", "replace")
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, out, cpu, wall


def main(argv):
    args, timeout, write, names = argv[1:], 10.0, None, []
    if not args or args[0].startswith("-"):
        print(__doc__[__doc__.index("usage:"):], end="", file=sys.stderr)
        return 2
    ctl = os.path.abspath(args.pop(0))
    while args:
        a = args.pop(0)
        if a == "--timeout" and args:
            timeout = float(args.pop(0))
        elif a == "--write" and args:
            write = args.pop(0)
        elif a in SHAPES:
            names.append(a)
        else:
            print("shapes.py: unknown shape or option '%s'" % a, file=sys.stderr)
            return 2
    names = names or list(SHAPES)
    work = write or tempfile.mkdtemp(prefix="shapes.")
    os.makedirs(work, exist_ok=True)
    fails = 0
    for name in names:
        spec, want_status, want = SHAPES[name]
        data = spec.encode()
        with open(os.path.join(work, name + ".yaml"), "wb") as f:
            f.write(data)
        if len(data) > LIMIT:
            print("FAIL: %s is %d bytes, over 1 MiB" % (name, len(data)))
            fails += 1
            continue
        if write:
            continue
        os.chdir(work)
        status, out, cpu, wall = run_shape(ctl, name, spec, timeout)
        line = out.splitlines()[-1] if status == 2 and out else out.splitlines()[0] if out else ""
        print("%-24s %8d B  exit %-4s cpu %6.3f s  wall %6.3f s  %.110s" %
              (name, len(data), status, cpu, wall, line))
        problems = []
        if status is None:
            problems.append("no answer within %g s" % timeout)
        elif status != want_status:
            problems.append("exit %s, expected %d" % (status, want_status))
        if status is not None and not re.search(want, out):
            problems.append("output does not match /%s/" % want)
        if status == 2 and not re.match(r"sandboxctl: %s\.yaml(:\d+:\d+)?: " % name, out):
            problems.append("the message does not name %s.yaml" % name)
        if cpu >= CPU_BUDGET_S:
            problems.append("%.3f s of CPU, the bound is %g s" % (cpu, CPU_BUDGET_S))
        for p in problems:
            print("FAIL: %s: %s" % (name, p))
        fails += bool(problems)
        os.unlink(os.path.join(work, name + ".yaml"))
    if write:
        print("wrote %d shapes into %s" % (len(names), write))
        return 1 if fails else 0
    os.rmdir(work)
    if fails:
        print("FAIL: %d of %d shapes" % (fails, len(names)))
        return 1
    print("ok: %d shapes of at most 1 MiB, each answered in under %g s of CPU" %
          (len(names), CPU_BUDGET_S))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
