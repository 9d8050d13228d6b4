"""``check_conformance(expr, isolate=True)``: the probes run in a child interpreter.

The child (``python -m dlpackarray conform EXPR --json --trace``) announces every probe
on stderr before running it (``report.note``) and has faulthandler on, so when it dies --
a signal, or an exception that escaped the checker -- the parent names the rule and the
call that was running and quotes the end of the child's stderr (the Python traceback).
The parent then runs the child again without that probe (``--skip``), so one crashing
probe costs one rule, not the whole report; ``process.no-crash`` fails and says why.

Every wait is bounded (``TIMEOUT`` per child, ``TOTAL_TIMEOUT`` per check); the child runs
in a session of its own, killed as a whole, and writes its output to files and its report
to a file only it (not a copy a producer forked) writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from dlpackarray.testing.report import FAIL, TRACE_PREFIX, ConformanceReport, Result

#: Crashing probes skipped, at most, before the report is given up.
MAX_RERUNS = 6
#: Seconds one child may run; a hung probe is then killed (with every process it started)
#: and named like a crash.
TIMEOUT = 60.0
#: Seconds all the children of one ``check_conformance(..., isolate=True)`` call may run
#: together: a producer that hangs in every call costs this much, not a rerun's worth each.
TOTAL_TIMEOUT = 120.0
#: Seconds to wait for a killed child to be reaped.
REAP_TIMEOUT = 10.0
#: Lines of the child's stderr quoted in process.no-crash: the end of it (from the last
#: traceback's header, when there is one in them) ...
TAIL_LINES = 30
#: ... and, before that, at most this many lines of the fatal error's own report (its
#: header and the Python frames faulthandler lists under it).
HEAD_LINES = 40


def _status(code: int | None) -> str:
    if code is None:
        return "did not end"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}" + (" (an uncaught exception)" if code == 1 else "")


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group: the child and whatever it started that did not
    leave the group (a producer's background process holding the child's output)."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _run(cmd, timeout: float) -> tuple[subprocess.CompletedProcess, str | None]:
    """Run the child; (its outcome, the report it wrote or None).

    Its stdout and stderr go to files and its report to a file of its own, never through
    pipes: a process the producer starts in the background inherits them, and a pipe would
    then never reach end-of-file.  Every wait is bounded: the child runs in a session of its
    own, which is killed as a whole after ``timeout`` seconds and when the child ends.
    """
    with tempfile.TemporaryDirectory(prefix="dlpackarray-conform-") as tmp:
        paths = {k: os.path.join(tmp, k) for k in ("stdout", "stderr", "report")}
        cmd = [*cmd, "--report-file", paths["report"]]
        with open(paths["stdout"], "wb") as out, open(paths["stderr"], "wb") as err:
            child = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=hasattr(os, "setsid"),
            )
            hung = False
            try:
                child.wait(timeout=max(timeout, 0.0))
            except subprocess.TimeoutExpired:
                hung = True
            _kill_group(child.pid)
            if hung:
                child.kill()  # reported as "killed by SIGKILL" at the hung probe
                try:
                    child.wait(timeout=REAP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
        texts: dict[str, str | None] = {}
        for key, path in paths.items():
            try:
                with open(path, "rb") as f:
                    texts[key] = f.read().decode(errors="replace")
            except OSError:
                texts[key] = None
    err_text = texts["stderr"] or ""
    if hung:
        err_text += f"\n(killed after {timeout:g} s: the probe hung)"
    proc = subprocess.CompletedProcess(cmd, child.returncode, texts["stdout"] or "", err_text)
    return proc, texts["report"]


def _split(stderr: str) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    """(probe announcements as (family, rule or None, action), the other stderr lines)."""
    probes: list[tuple[str, str | None, str]] = []
    other: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(TRACE_PREFIX):
            family, rule, action = (line[len(TRACE_PREFIX) :].split("\t", 2) + ["", ""])[:3]
            probes.append((family, None if rule == "-" else rule, action))
        elif line.strip() and not line.startswith("Extension modules:"):
            other.append(line.rstrip())
    return probes, other


def _is_frame_section(line: str) -> bool:
    """A line of faulthandler's Python-level report (thread headers and frames)."""
    return line.startswith(("  File ", "Current thread", "Thread 0x", "Stack (most recent", "  <"))


def _tail(lines: list[str]) -> list[str]:
    """What identifies the child's death in its stderr, bounded.

    A fatal error's header and the Python frames faulthandler lists under it come first
    (Python 3.14 appends a C stack after them, long enough to push them out of any fixed
    tail); then the end of stderr, from the header of its last Python traceback.
    """
    head: list[str] = []
    fatal = [i for i, t in enumerate(lines) if t.startswith("Fatal Python error")]
    if fatal:
        start = fatal[-1]
        end = start + 1
        while end < len(lines) and end - start < HEAD_LINES and _is_frame_section(lines[end]):
            if "C stack" in lines[end]:
                break
            end += 1
        head = lines[start:end]
        rest = lines[end:]
    else:
        rest = lines
    tail = rest[-TAIL_LINES:]
    heads = [i for i, t in enumerate(tail) if t.startswith(("Fatal Python error", "Traceback"))]
    tail = tail[heads[-1] :] if heads else tail
    if head and tail and len(rest) > len(tail):
        return [*head, "...", *tail]
    return [*head, *tail]


def _last_probe(probes):
    """(family, rule, action): the family and rule of the last announced probe, and the
    last call announced after it (a rule's probe announces its calls without a rule)."""
    if not probes:
        return None, None, "loading the producer"
    family, _, action = probes[-1]
    rule = None
    for fam, r, _ in reversed(probes):
        if fam != family:
            break
        if r is not None:
            rule = r
            break
    return family, rule, action


def run_isolated(
    expr: str, protocols, parse, no_crash, *, consumer: bool = False
) -> ConformanceReport:
    """The report of ``expr`` probed in child interpreters (see the module docstring);
    ``consumer``: ``expr`` names a consumer (``conform --consumer``), not a producer."""
    families: Any
    if consumer:
        from dlpackarray.testing.consumer import FAMILIES as families
        from dlpackarray.testing.consumer import RULES
    else:
        from dlpackarray.testing import FAMILIES as families
        from dlpackarray.testing import RULES

    skip: list[str] = []
    crashes: list[str] = []
    crashed_rules: dict[str, str] = {}
    parsed = None
    deadline = time.monotonic() + TOTAL_TIMEOUT
    for _ in range(MAX_RERUNS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            crashes.append(f"no time left for another run (all runs: {TOTAL_TIMEOUT:g} s)")
            break
        target = ["--consumer", expr] if consumer else [expr]
        cmd = [sys.executable, "-m", "dlpackarray", "conform", *target, "--json", "--trace"]
        if protocols is not None:
            cmd += ["--protocols", ",".join(protocols)]
        if skip:
            cmd += ["--skip", ",".join(skip)]
        proc, written = _run(cmd, min(TIMEOUT, left))
        unreadable = None
        try:
            parsed = parse(written) if written else None
        except (ValueError, KeyError, TypeError) as exc:
            parsed = None
            unreadable = f"{type(exc).__name__}: {exc}; it starts {(written or '')[:200]!r}"
        if proc.returncode in (0, 1) and parsed is not None:
            break
        if proc.returncode == 0 or (proc.returncode == 1 and unreadable is not None):
            # The child ended normally without a report it could be judged by: say what it
            # left rather than calling that a crash.  (Exit status 1 without a report is an
            # exception that escaped; a signal is a crash: both are named below.)
            what = unreadable or "it wrote none"
            crashes.append(
                f"the child ended with {_status(proc.returncode)} but its report could not "
                f"be read ({what}); its stdout starts {proc.stdout[:200]!r}"
            )
            break
        probes, other = _split(proc.stderr)
        family, rule, action = _last_probe(probes)
        if family == "process":
            where = "after every probe had finished (at interpreter exit)"
        elif family in ("load", None):
            subject = "consumer" if consumer else "producer"
            where = f"while loading the {subject} ({action})"
        elif rule is not None:
            where = f"while probing rule {rule} ({action})"
        else:
            where = f"in the {family} family before any rule's probe ({action})"
        tail = " | ".join(_tail(other)) or "(nothing on stderr)"
        crashes.append(f"{_status(proc.returncode)} {where}; child stderr: {tail}")
        if parsed is not None:
            break  # the report was written before the crash
        token = rule or (family if family in families else None)
        if token is None or token in skip:
            break  # nothing to leave out that would get past it
        skip.append(token)
        if rule is not None:
            crashed_rules[rule] = (
                f"the probe crashed the interpreter ({_status(proc.returncode)}) at "
                f"{action}; see process.no-crash"
            )
    results = []
    if parsed is not None:
        for r in parsed.results:
            if r.rule.id in crashed_rules:
                r = Result(r.rule, FAIL, crashed_rules[r.rule.id])
            elif r.rule.id == no_crash.id and crashes:
                r = Result(no_crash, FAIL, " || ".join(crashes))
            results.append(r)
    else:
        results = [Result(RULES[i], FAIL, m) for i, m in crashed_rules.items()]
        results.append(Result(no_crash, FAIL, " || ".join(crashes)))
    return ConformanceReport(parsed.subject if parsed is not None else expr, results)
