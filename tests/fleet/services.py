# SPDX-License-Identifier: Apache-2.0
"""What the fleet's test services share (nats_cluster.py, swift_s3.py): start a set of
server processes, each logging to its file, wait until every one answers, print the ready
line, and stop them all when stdin ends or on SIGTERM, so that the test that started them
(over a pipe) takes them down with it, even when it dies."""
import os
import signal
import subprocess
import sys
import threading
import time


class Servers:
    def __init__(self, name):
        self.name, self.procs, self.logs = name, [], []

    def start(self, argv, log_path):
        log = open(log_path, "ab")
        self.logs.append(log_path)
        self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=log))

    def stop(self, *_):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        os._exit(0)

    def serve(self, answering, start_s, line):
        """Wait until answering() (at most start_s: else the logs' ends on stderr and exit),
        print line, then run until stdin ends or a signal."""
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        deadline = time.monotonic() + start_s
        while not answering():
            if any(p.poll() is not None for p in self.procs) or time.monotonic() > deadline:
                for path in self.logs:
                    with open(path, "rb") as f:
                        sys.stderr.write("--- %s\n%s\n" % (path, f.read()[-2000:].decode(
                            errors="replace")))
                print("%s: the servers did not answer in %d s" % (self.name, start_s),
                      file=sys.stderr)
                self.stop()
            time.sleep(0.1)
        print(line, flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), self.stop()), daemon=True).start()
        while True:
            time.sleep(3600)
