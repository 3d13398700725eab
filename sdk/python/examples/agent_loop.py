#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An agent's tool loop on one sandbox: the model asks for tools, the loop runs them in the
sandbox and gives the results back, until the model answers.

The "model" here is a stand-in that follows a script (so the example runs offline and
deterministically); put a real model's tool calls in `next_action`. What matters is the loop:

- one sandbox for the whole conversation, one connection kept open;
- output streamed to the user while a command runs, and a bounded copy for the model;
- a timeout on every command, and errors given back to the model as text, not raised;
- a snapshot before a risky step, and a restore when it went wrong (the undo button).

usage: agent_loop.py [--image NAME]   (needs sandboxctl and an installed image)
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sandbox_sdk import CommandExitError, Sandbox, SandboxError  # noqa: E402

MAX_TOOL_OUTPUT = 4000  # what the model is shown of a command's output


class ScriptedModel:
    """Stands in for a model: its tool calls, in order, then an answer."""

    def __init__(self):
        self.steps = [
            ("write_file", {"path": "/work/fib.py", "content":
                            "import sys\n"
                            "def fib(n):\n"
                            "    a, b = 0, 1\n"
                            "    for _ in range(n):\n"
                            "        a, b = b, a + b\n"
                            "    return a\n"
                            "print(fib(int(sys.argv[1])))\n"}),
            ("run", {"cmd": "python3 /work/fib.py 30 || sh -c 'echo no python here; exit 1'"}),
            ("checkpoint", {}),
            ("run", {"cmd": "rm -rf /work && ls /work"}),  # a step that goes wrong
            ("undo", {}),
            ("read_file", {"path": "/work/fib.py"}),
        ]

    def next_action(self, last_result):
        if last_result is not None:
            print("  [model sees] %s" % last_result[:200].replace("\n", "\\n"))
        if not self.steps:
            return ("answer", {"text": "done: fib.py ran (or said why not), /work came back "
                               "after the rm"})
        return self.steps.pop(0)


class Tools:
    """The tools the model may call, run in the sandbox."""

    def __init__(self, sb):
        self.sb = sb
        self.checkpoints = []

    def run(self, cmd):
        try:
            r = self.sb.run(cmd, timeout=120, cwd="/", on_stdout=lambda s: print("  | " + s,
                                                                                  end=""))
            return "exit 0\n" + r.stdout[-MAX_TOOL_OUTPUT:]
        except CommandExitError as e:  # the model is told, it decides what next
            return "exit %d\n%s%s" % (e.exit_code, e.result.stdout[-MAX_TOOL_OUTPUT:],
                                      e.result.stderr[-MAX_TOOL_OUTPUT:])

    def write_file(self, path, content):
        self.sb.files.make_dir(os.path.dirname(path))
        self.sb.files.write(path, content)
        return "wrote %d bytes to %s" % (len(content), path)

    def read_file(self, path):
        return self.sb.files.read(path, text=True, max_bytes=1 << 20)[:MAX_TOOL_OUTPUT]

    def checkpoint(self):
        name = "agent-%s-%d" % (self.sb.id, len(self.checkpoints))
        self.sb.snapshot(name)
        self.checkpoints.append(name)
        return "checkpoint %s taken" % name

    def undo(self):
        """Go back to the last checkpoint: a new sandbox restored from it replaces this one."""
        name = self.checkpoints[-1]
        restored = Sandbox.restore(name)
        self.sb.kill()
        self.sb = restored
        return "restored %s" % name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default=None)
    a = ap.parse_args()
    model = ScriptedModel()
    with Sandbox.create(image=a.image, network="none") as first:
        tools = Tools(first)
        try:
            result = None
            while True:
                action, args = model.next_action(result)
                if action == "answer":
                    print("answer:", args["text"])
                    break
                print("tool %s %s" % (action, {k: v[:40] for k, v in args.items()}))
                try:
                    result = getattr(tools, action)(**args)
                except SandboxError as e:
                    result = "error: %s" % e
        finally:
            if tools.sb is not first:
                tools.sb.kill()
            for name in tools.checkpoints:
                Sandbox.remove_snapshot(name)


if __name__ == "__main__":
    main()
