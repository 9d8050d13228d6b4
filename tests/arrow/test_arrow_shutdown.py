"""Arrow exports released by threads the interpreter never saw, racing its
exit, which must neither crash nor hang it: the Arrow twins of the DLPack deleter tests in
test_lifetime_crashes.py, over the four exports that hold the source alive
(array, device array, stream, device stream).

Before the shutdown gate, the release paths (release callback ->
arrow_export_unref -> the keepalive's release) were noexcept and took the GIL
after the finalizing check: a thread CPython ended with pthread_exit while it
waited for the GIL aborted the process ("terminate called without an active
exception"), and a thread that reached PyGILState_Ensure during the teardown
segfaulted.  Here 60 to 90 % of the race runs failed (docs/reliability.md).
Each run is a child interpreter (shutdown_race.run_many); CI runs each race
200 times (DLPACKARRAY_SHUTDOWN_RACES).
"""

from __future__ import annotations

import sys

import pytest
import shutdown_race
from conftest import assert_clean_exit, run_python

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="starts threads with glibc's pthread_create"
)


@pytest.mark.parametrize("kind", shutdown_race.ARROW_KINDS)
def test_arrow_releases_on_foreign_c_threads_during_shutdown_never_abort(kind):
    runs = shutdown_race.RACES
    failures = shutdown_race.run_many(shutdown_race.burst_script((kind,)), runs)
    assert not failures, shutdown_race.failure_report(failures, runs)


@pytest.mark.parametrize("kind", shutdown_race.ARROW_KINDS)
def test_arrow_release_on_foreign_thread_after_exit_began_leaks(kind):
    """Once exit has begun (atexit callbacks running), a release on a thread
    without the GIL leaves Python alone: the source is leaked, not released."""
    proc = run_python(shutdown_race.after_exit_began_script(kind))
    assert_clean_exit(proc)
    assert proc.stdout.split() == ["taken", "True", "leaked"], proc.stdout


@pytest.mark.parametrize("kind", shutdown_race.ARROW_KINDS)
def test_arrow_release_inside_python_when_exit_begins_finishes(kind):
    """A release already running Python code (the source's finalizer) when the
    interpreter exits is waited for and finishes."""
    proc = run_python(shutdown_race.in_flight_script(kind))
    assert_clean_exit(proc)
    assert proc.stdout.split() == ["exiting", "finished"], proc.stdout
