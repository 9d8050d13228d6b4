"""``check_conformance(expr, isolate=True)``: the probes run in a child interpreter.

The child (``python -m dlpackarray conform EXPR --json --trace``) announces every probe
on stderr before running it (``report.note``) and has faulthandler on, so when it dies --
a signal, or an exception that escaped the checker -- the parent names the rule and the
call that was running and quotes the end of the child's stderr (the Python traceback).
The parent then runs the child again without that probe (``--skip``), so one crashing
probe costs one rule, not the whole report; ``process.no-crash`` fails and says why.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from dlpackarray.testing.report import FAIL, TRACE_PREFIX, ConformanceReport, Result

#: Crashing probes skipped, at most, before the report is given up.
MAX_RERUNS = 6
#: Seconds one child may run; a hung probe is then killed and named like a crash.
TIMEOUT = 600.0
#: Lines of the child's stderr quoted in process.no-crash (from the last traceback's
#: header, when there is one in them).
TAIL_LINES = 30


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}" + (" (an uncaught exception)" if code == 1 else "")


def _run(cmd) -> subprocess.CompletedProcess:
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
    ) as child:
        try:
            out, err = child.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()  # SIGKILL: reported as "killed by SIGKILL" at the hung probe
            out, err = child.communicate()
            err += f"\n(killed after {TIMEOUT:g} s: the probe hung)"
    return subprocess.CompletedProcess(cmd, child.returncode, out, err)


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


def _tail(lines: list[str]) -> list[str]:
    """The end of the child's stderr, from the header of its last Python traceback."""
    lines = lines[-TAIL_LINES:]
    heads = [i for i, t in enumerate(lines) if t.startswith(("Fatal Python error", "Traceback"))]
    return lines[heads[-1] :] if heads else lines


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


def run_isolated(expr: str, protocols, parse, no_crash) -> ConformanceReport:
    """The report of ``expr`` probed in child interpreters (see the module docstring)."""
    from dlpackarray.testing import FAMILIES, RULES

    skip: list[str] = []
    crashes: list[str] = []
    crashed_rules: dict[str, str] = {}
    parsed = None
    for _ in range(MAX_RERUNS + 1):
        cmd = [sys.executable, "-m", "dlpackarray", "conform", expr, "--json", "--trace"]
        if protocols is not None:
            cmd += ["--protocols", ",".join(protocols)]
        if skip:
            cmd += ["--skip", ",".join(skip)]
        proc = _run(cmd)
        try:
            parsed = parse(proc.stdout)
        except (ValueError, KeyError, TypeError):
            parsed = None
        if proc.returncode in (0, 1) and parsed is not None:
            break
        probes, other = _split(proc.stderr)
        family, rule, action = _last_probe(probes)
        if family == "process":
            where = "after every probe had finished (at interpreter exit)"
        elif family in ("load", None):
            where = f"while loading the producer ({action})"
        elif rule is not None:
            where = f"while probing rule {rule} ({action})"
        else:
            where = f"in the {family} family before any rule's probe ({action})"
        tail = " | ".join(_tail(other)) or "(nothing on stderr)"
        crashes.append(f"{_status(proc.returncode)} {where}; child stderr: {tail}")
        if parsed is not None:
            break  # the report was written before the crash
        token = rule or (family if family in FAMILIES else None)
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
