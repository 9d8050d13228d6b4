"""Run one probe in a forked child, so a crash (double free, a deleter that needs the
GIL) fails a rule instead of killing the checker.

Only the probe's own steps run in the child: the producer's object was built (and its
capsule exported) in the parent, and the child never returns to the caller's code
(``os._exit``).  Where ``os.fork`` is missing, or the child does not finish in time (a
lock held by another thread of the parent at fork time), the probe has no verdict.
"""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import sys
import time
import warnings

#: Seconds a child may take (generous: it only releases one struct).
TIMEOUT = 20.0


def available() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


def _sanitizer_reports_to_stderr() -> None:
    # Under an AddressSanitizer build (docs/reliability.md) the runtime writes reports to
    # the files of ASAN_OPTIONS' log_path, where CI counts every report as a finding; a
    # probe's crash is the intended observation, so the child sends it through fd 2 (the
    # pipe to the parent) instead and the parent quotes it in the rule's message.
    import ctypes

    try:
        set_report_fd = ctypes.CDLL(None).__sanitizer_set_report_fd
    except (OSError, AttributeError):  # no sanitizer runtime in this process
        return
    set_report_fd.argtypes = [ctypes.c_void_p]
    set_report_fd(2)


def run(probe, timeout: float = TIMEOUT) -> tuple[bool | None, str]:
    """``(True, "")`` when ``probe()`` returned None in the child, ``(False, why)`` when it
    returned a message, raised or crashed, ``(None, why)`` when there is no verdict."""
    if not available():
        return None, "os.fork is not available on this platform"
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Libraries warn that a fork of a threaded process may deadlock (JAX; CPython 3.12+):
        # the child runs only the probe, and a deadlock ends as "no verdict" (timeout).
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report through fd 2 (the pipe) and the exit status
        code = 0
        try:
            os.close(read_end)
            os.dup2(write_end, 2)
            faulthandler.disable()  # a crash is the observation; its exit status says it
            _sanitizer_reports_to_stderr()
            why = probe()
            if why:
                os.write(2, str(why).encode(errors="replace"))
                code = 1
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            try:
                os.write(2, f"{type(exc).__name__}: {exc}".encode(errors="replace"))
            finally:
                code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None, f"the child did not finish in {timeout:g} s"
            ready, _, _ = select.select([read_end], [], [], min(left, 0.5))
            if ready:
                data = os.read(read_end, 65536)
                if not data:
                    break
                chunks.append(data)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace").strip()
    tail = " | ".join(text.splitlines()[-3:])
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
        return False, f"crashed ({name})" + (f": {tail}" if tail else "")
    if os.WEXITSTATUS(status) != 0:
        return False, tail or f"exit status {os.WEXITSTATUS(status)}"
    return True, ""
