"""Runs adversarial cases in a persistent child process (worker.py).

A crash (signal, sanitizer abort, non-JSON output) or a hang fails only the
case that caused it: the worker is replaced and the next case runs in a
fresh one.  The child inherits the environment, so under the sanitizer build
(docs/reliability.md) every case runs with ASan/UBSan too.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


class Runner:
    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.proc = None
        self.stderr = None

    def _start(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(
            [sys.executable, WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-4000:].decode(errors="replace")

    def _kill(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
        self.proc = None

    def run(self, case_id: str) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._kill()
            self._start()
        try:
            self.proc.stdin.write(case_id.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(self.timeout)
        sel.close()
        if not ready:
            tail = self._stderr_tail()
            self._kill()
            return {"outcome": "hang", "stderr": tail}
        line = self.proc.stdout.readline()
        try:
            return json.loads(line)
        except ValueError:
            self.proc.wait()
            tail = self._stderr_tail()
            code = self.proc.returncode
            self._kill()
            return {"outcome": "crash", "returncode": code, "stderr": tail}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        self._kill()
