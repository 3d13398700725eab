#!/usr/bin/env python3
"""sandboxctl's face, pinned: for every command its --help, an unknown option, no arguments
and a few bad values, the exact stdout, stderr and exit status, against the files under
tests/golden/sandboxctl/ (one per case). What a user sees must not change by accident when
the code behind the commands moves; a deliberate change rewrites the files with --update
and shows in the diff.

usage: ctl_golden.py SANDBOXCTL GOLDEN_DIR [--update]

Every case runs with an empty $SANDBOX_HOME (shown as $SANDBOX_HOME in the files) and
SANDBOX_SKIP_HOST_CHECK=1, so the files are the same on every machine; none of them starts a
VM. Natively, on every machine."""
import os
import subprocess
import sys
import tempfile

COMMANDS = ["create", "exec", "cp", "run", "ls", "stats", "logs", "pause", "resume", "stop",
            "start", "rm", "snapshot", "restore", "fork", "suspend", "snapshots", "images",
            "net", "port", "push", "pull"]

CASES = [[], ["--help"], ["--version"], ["no-such-command"]]
for c in COMMANDS:
    CASES += [[c, "--help"], [c, "--no-such-option"]]
    if c not in ("ls", "snapshots", "images"):  # those list an empty home: below, with a bad flag
        CASES.append([c])
CASES += [
    ["create", "--cpus", "0"], ["create", "--memory", "x"], ["create", "--image", "../x"],
    ["exec", "nosuch", "--", "true"], ["exec", "nosuch"], ["cp", "a", "b"],
    ["run", "/nonexistent/job.yaml"], ["stats", "nosuch"], ["logs", "nosuch"],
    ["rm", "nosuch"], ["snapshot", "nosuch", "snap"], ["snapshot", "nosuch", "../bad"],
    ["restore", "nosuch"], ["fork", "-n", "0", "nosuch"], ["fork", "-n", "x", "nosuch"],
    ["suspend", "nosuch"], ["images", "no-such-subcommand"], ["images", "import"],
    ["images", "import", "--help"], ["images", "import", "x", "--oci", "/nonexistent.tar"],
    ["images", "ls", "--json", "extra"], ["net", "policy", "nosuch"], ["net", "log", "nosuch"],
    ["net", "no-such-subcommand"], ["port", "nosuch", "0"], ["port", "nosuch", "70000"],
    ["snapshots", "--json", "extra"], ["ls", "extra"],
]


def case_name(argv):
    if not argv:
        return "no-arguments"
    return "_".join(a.strip("-").replace("/", "%") or "-" for a in argv)


def run_case(ctl, argv, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env.update(SANDBOX_HOME=home, SANDBOX_SKIP_HOST_CHECK="1", LC_ALL="C", TERM="dumb")
    p = subprocess.run([ctl] + argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    out = "$ sandboxctl %s\nstatus %d\n--- stdout\n%s--- stderr\n%s" % (
        " ".join(argv), p.returncode, p.stdout.decode(errors="replace"),
        p.stderr.decode(errors="replace"))
    return out.replace(home, "$SANDBOX_HOME")


def main():
    ctl, golden = sys.argv[1], sys.argv[2]
    update = "--update" in sys.argv[3:]
    failed = 0
    seen = set()
    for argv in CASES:
        name = case_name(argv)
        assert name not in seen, name
        seen.add(name)
        with tempfile.TemporaryDirectory() as home:
            got = run_case(ctl, argv, home)
        path = os.path.join(golden, name + ".txt")
        if update:
            with open(path, "w") as f:
                f.write(got)
            continue
        try:
            with open(path) as f:
                want = f.read()
        except FileNotFoundError:
            print("FAIL: %s: no golden file %s (run with --update)" % (name, path))
            failed += 1
            continue
        if got != want:
            failed += 1
            print("FAIL: sandboxctl %s differs from %s:" % (" ".join(argv), path))
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                want.splitlines(True), got.splitlines(True), "golden", "now"))
    if not update:
        stale = [f for f in os.listdir(golden) if f[:-4] not in seen]
        for f in stale:
            print("FAIL: %s: a golden file no case makes" % f)
        failed += len(stale)
        print("%d cases, %d differ" % (len(CASES), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
