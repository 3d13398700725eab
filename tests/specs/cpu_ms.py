#!/usr/bin/env python3
"""cpu_ms.py FILE CMD...: run CMD (its output and exit status passed through) and write the CPU
time it used, user and system, in ms, to FILE: the time a spec costs, which a loaded machine
does not inflate the way it does wall time (check.sh's bound of a second per spec)."""
import resource
import subprocess
import sys

rc = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % round((r.ru_utime + r.ru_stime) * 1000))
sys.exit(rc if rc >= 0 else 128 - rc)
