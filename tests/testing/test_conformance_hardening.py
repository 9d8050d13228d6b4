"""dlpackarray.testing against hostile producers and hostile environments: bounded waits,
no growth per check, no exception of a producer escaping, hostile capsule fields refused
before they are used, usage errors of ``conform`` as exit status 2, crash reports that
keep what identifies the crash, and public specification citations."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conform_corpus import HOSTILE, Made
from conftest import assert_clean_exit, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray.testing import (
    FAMILIES,
    RULES,
    _abi,
    _isolate,
    check_conformance,
)


def _failed(report) -> set[str]:
    return {r.rule.id for r in report.failures()}


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


# -- protocols=<one name> -----------------------------------------------------------------


@pytest.mark.parametrize("family", list(FAMILIES))
def test_protocols_one_name_is_that_family(family):
    """A str names one family: the report equals the one for a one-element list."""
    one = check_conformance(Made(version=(2, 0)), protocols=family)
    listed = check_conformance(Made(version=(2, 0)), protocols=[family])
    assert [(r.rule.id, r.status) for r in one.results] == [
        (r.rule.id, r.status) for r in listed.results
    ]
    others = [r for r in one.results if r.rule.id not in FAMILIES[family][0]]
    assert all(r.status == "not-applicable" for r in others if r.rule.protocol != "process")


def test_protocols_unknown_name_is_named():
    """An unknown family is refused with its whole name, never split into letters."""
    with pytest.raises(ValueError, match=r"\['dlpak'\]"):
        check_conformance(Made(), protocols="dlpak")
    assert _failed(check_conformance(Made(version=(2, 0)), protocols="dlpack")) == {
        "dlpack.version.major"
    }


# -- conform's usage errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["np.arange(3) +"],
        ["undefined_name_for_conform"],
        ["/nonexistent/dir/array.npy"],
        ["np.arange(3.0)", "--protocols", "nope"],
        ["np.arange(3.0)", "--protocols", "dlpack,nope"],
        ["np.arange(3) +", "--isolate"],
    ],
    ids=["syntax", "undefined", "missing-npy", "unknown-protocol", "one-unknown", "isolated"],
)
def test_conform_usage_error_is_exit_2_one_line(args):
    """A usage error exits 2 with one line on stderr and no traceback (1 is "not
    conformant")."""
    proc = subprocess.run(
        [sys.executable, "-m", "dlpackarray", "conform", *args],
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


# -- BaseException out of a producer -----------------------------------------------------


class _Raises(Made):
    def __init__(self, exc, where="__dlpack__"):
        super().__init__()
        self.exc, self.where = exc, where

    def __dlpack__(self, **kw):
        if self.where == "__dlpack__":
            raise self.exc
        return super().__dlpack__(**kw)

    def __dlpack_device__(self):
        if self.where == "__dlpack_device__":
            raise self.exc
        return super().__dlpack_device__()


@pytest.mark.parametrize("where", ["__dlpack__", "__dlpack_device__"])
@pytest.mark.parametrize(
    "exc",
    [SystemExit(3), GeneratorExit(), KeyboardInterrupt(), BaseException("bare")],
    ids=["SystemExit", "GeneratorExit", "KeyboardInterrupt", "BaseException"],
)
def test_base_exception_of_a_producer_is_its_failure(exc, where):
    """Every exception a producer raises is reported as a failure, never raised."""
    report = check_conformance(_Raises(exc, where))
    assert not report.ok
    assert any(type(exc).__name__ in r.message for r in report.failures()), str(report)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _SigintDuringCheck(Made):
    def __dlpack__(self, **kw):
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C delivers
        return super().__dlpack__(**kw)


def test_a_real_sigint_stops_the_check():
    """A SIGINT delivered during the check (the user's Ctrl-C) is raised, not reported."""
    with pytest.raises(KeyboardInterrupt):
        check_conformance(_SigintDuringCheck())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_keyboard_interrupt_off_the_main_thread_is_reported_and_said_so():
    """Off the main thread no SIGINT can be watched: a producer's KeyboardInterrupt is
    reported, and its message says the checker could not tell it from a Ctrl-C."""
    import threading

    out = []
    worker = threading.Thread(
        target=lambda: out.append(check_conformance(_Raises(KeyboardInterrupt("p"))))
    )
    worker.start()
    worker.join(120)
    (report,) = out
    messages = " ".join(r.message for r in report.failures())
    assert "KeyboardInterrupt" in messages and "Ctrl-C" in messages


# -- constant memory over many checks -----------------------------------------------------


def test_call_counters_do_not_outlive_their_check():
    """No deleter/release counter (nor its C callback) stays alive after a check."""
    for _ in range(20):
        check_conformance(Made(), protocols="dlpack")
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is _abi.CallCounter]
    assert alive == []
    assert len(_abi._LIVE) == 0


def test_memory_is_bounded_over_many_checks():
    """Python memory does not grow with the number of checks."""
    import tracemalloc

    for _ in range(20):  # warm caches
        check_conformance(Made(), protocols="dlpack")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100):
            check_conformance(Made(), protocols="dlpack")
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 50_000, f"{grown} bytes more after 100 checks"


# -- hostile capsule fields --------------------------------------------------------------


def test_hostile_capsules_are_refused_in_process():
    """Every hostile field value of the corpus is reported by the in-process checker
    (no read past the shape, no crash, no hang), run in a child with a timeout."""
    code = (
        "import json\n"
        "from conform_corpus import HOSTILE, Made\n"
        "from dlpackarray.testing import check_conformance\n"
        "out = []\n"
        "for bugs, _ in HOSTILE:\n"
        "    r = check_conformance(Made(**bugs))\n"
        "    out.append(sorted(x.rule.id for x in r.failures()))\n"
        "print(json.dumps(out))\n"
    )
    proc = run_python(code, timeout=300)
    assert_clean_exit(proc)
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for (bugs, expected), failed in zip(HOSTILE, results, strict=True):
        assert expected & set(failed), (bugs, failed)


def test_ndim_bound_is_dlpackarrays():
    """The checker reads shapes for exactly the ndims DLPackArray accepts."""
    import dlpackarray
    from dlpackarray.testing.dlpack import ndim_in_range

    assert ndim_in_range(dlpackarray.MAX_NDIM) and not ndim_in_range(dlpackarray.MAX_NDIM + 1)
    assert ndim_in_range(0) and not ndim_in_range(-1)


# -- isolate=True: bounded waits, forks, crash reports ------------------------------------


def test_isolate_background_process_does_not_hold_the_check(tmp_path):
    """A producer's background process holding the child's stdout/stderr neither blocks
    the check nor outlives it; a hung producer costs at most the total timeout."""
    pidfile = tmp_path / "pid"
    expr = (
        f"open({str(pidfile)!r}, 'w').write(str(__import__('subprocess').Popen("
        "['sleep', '300']).pid)) and __import__('dlpackarray').DLPackArray(np.arange(3.0))"
    )
    code = (
        "import json, time\n"
        "from dlpackarray.testing import _isolate, check_conformance\n"
        "_isolate.TIMEOUT, _isolate.TOTAL_TIMEOUT = 20.0, 40.0\n"
        "t = time.monotonic()\n"
        f"r = check_conformance({expr!r}, isolate=True)\n"
        "quick = time.monotonic() - t\n"
        "_isolate.TIMEOUT, _isolate.TOTAL_TIMEOUT = 3.0, 6.0\n"
        "t = time.monotonic()\n"
        "h = check_conformance('__import__(\"time\").sleep(300)', isolate=True)\n"
        "print(json.dumps([r.ok, quick, h.ok, time.monotonic() - t,\n"
        "    [x.message for x in h.failures()]]))\n"
    )
    proc = run_python(code, timeout=200)
    assert_clean_exit(proc)
    ok, quick, hung_ok, hung_for, messages = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok and quick < 20.0
    assert not hung_ok and hung_for < 20.0 and "hung" in " ".join(messages)
    pid = int(pidfile.read_text())
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid), "the producer's background process outlived the check"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that nobody reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_isolate_producer_that_forks_keeps_its_verdicts(monkeypatch):
    """A producer forking inside __dlpack__ leaves a second copy of the child running the
    checker: only the original child's report is read, and every verdict is kept."""
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    report = check_conformance("__import__('conform_corpus').ForkingMade()", isolate=True)
    assert _failed(report) == set(), str(report)
    assert any(r.status == "pass" for r in report.results if r.rule.protocol == "dlpack")


def test_isolate_unreadable_report_is_named_not_called_a_crash():
    """A child that ends normally with a report that cannot be parsed is reported as such."""

    def unreadable(text):
        raise ValueError("not a report")

    report = _isolate.run_isolated("np.arange(3.0)", None, unreadable, RULES["process.no-crash"])
    (bad,) = report.failures()
    assert bad.rule.id == "process.no-crash"
    assert "could not be read" in bad.message and "not a report" in bad.message
    assert "killed" not in bad.message


def test_isolate_child_ending_without_a_report_is_named():
    """A child that exits 0 before writing a report (a producer calling sys.exit while
    loading) is reported as ending without one, not as a crash."""
    report = check_conformance("__import__('sys').exit(0)", isolate=True)
    (bad,) = report.failures()
    assert "exit status 0" in bad.message and "it wrote none" in bad.message


def _stderr(frames: int, c_stack: int, extra: int = 0) -> list[str]:
    lines = ["some warning"] * extra
    lines += ["Fatal Python error: Segmentation fault", "", "Current thread 0x7f (most recent"
              " call first):"]  # fmt: skip
    lines += [f'  File "/p/producer.py", line {i + 1} in probe_{i}' for i in range(frames)]
    lines += ["", "Current thread's C stack trace (most recent call first):"]
    lines += [f'  Binary file "/lib/x.so", at +0x{i:x} [0x{i:x}]' for i in range(c_stack)]
    lines += ["", "Extension modules: numpy (total: 1)"]
    return lines


@settings(max_examples=60, deadline=None)
@given(frames=st.integers(1, 60), c_stack=st.integers(0, 400), extra=st.integers(0, 100))
def test_crash_tail_keeps_the_fatal_error_and_its_frame(frames, c_stack, extra):
    """Whatever follows it (3.14's C stack), the kept stderr names the fatal error and the
    innermost Python frame, and stays bounded."""
    _, other = _isolate._split("\n".join(_stderr(frames, c_stack, extra)))
    kept = _isolate._tail(other)
    assert kept[0] == "Fatal Python error: Segmentation fault"
    assert '  File "/p/producer.py", line 1 in probe_0' in kept
    assert len(kept) <= _isolate.HEAD_LINES + _isolate.TAIL_LINES + 1


def test_crash_tail_keeps_a_python_traceback():
    """Without a fatal error, the last Python traceback and its exception line are kept."""
    lines = ["noise"] * 50 + ["Traceback (most recent call last):", '  File "x", line 1']
    lines += ["ValueError: boom"]
    kept = _isolate._tail(lines)
    assert kept[0].startswith("Traceback") and kept[-1] == "ValueError: boom"


# -- public citations ---------------------------------------------------------------------

_LOCAL_FILE = re.compile(r"\b(seeds|reference)/[\w.-]+\.(txt|md)\b")


def test_every_rule_cites_a_public_specification():
    """Every citation of every rule is a section of a public document with its https URL,
    never a file of this repository's working notes."""
    for rule in RULES.values():
        assert not _LOCAL_FILE.search(rule.reference), (rule.id, rule.reference)
        for part in rule.reference.split("; "):
            assert re.fullmatch(r"[^;()]+ § .+ \(https://[^\s()]+\)", part), (rule.id, part)


def test_no_local_spec_file_is_cited_in_the_checker():
    """No user-visible text of the checker or conform names a local spec file."""
    import dlpackarray.cli.conform as conform_cli
    import dlpackarray.testing as testing

    folder = os.path.dirname(testing.__file__)
    sources = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")]
    sources.append(conform_cli.__file__)
    for path in sources:
        with open(path) as f:
            assert not _LOCAL_FILE.search(f.read()), path
