"""Telling the user's Ctrl-C from a ``KeyboardInterrupt`` a producer raises itself.

The checker reports every exception out of a producer -- ``BaseException`` subclasses such
as ``SystemExit`` and ``GeneratorExit`` included -- as the producer's failure, and never
raises it.  A ``KeyboardInterrupt`` is the exception: when it comes from a real SIGINT
delivered during the check, the user wants the check to stop.  While a check runs in the
main thread with Python's default SIGINT handler installed, a handler that records the
signal (then raises as the default one does) tells the two apart.  Elsewhere (another
thread, a handler of the caller's own) the checker cannot tell, and reports the exception
as the producer's, saying so.
"""

from __future__ import annotations

import signal
import threading


class Watch:
    """Context manager: while active, ``seen`` is True once a SIGINT was delivered."""

    def __init__(self):
        self.seen = False
        self.watching = False
        self._previous = None

    def _handler(self, signum, frame):
        self.seen = True
        signal.default_int_handler(signum, frame)

    def __enter__(self) -> Watch:
        if threading.current_thread() is threading.main_thread():
            try:
                current = signal.getsignal(signal.SIGINT)
            except (ValueError, AttributeError):
                current = None
            if current is signal.default_int_handler:
                signal.signal(signal.SIGINT, self._handler)
                self._previous = current
                self.watching = True
        return self

    def __exit__(self, *exc) -> None:
        if self.watching:
            signal.signal(signal.SIGINT, self._previous)
            self.watching = False

    def reraise_if_user(self, exc: BaseException) -> None:
        """Re-raise ``exc`` when it is the user's Ctrl-C (a SIGINT seen during the check)."""
        if isinstance(exc, KeyboardInterrupt) and self.seen:
            raise exc


def describe(exc: BaseException, watch: Watch) -> str:
    """``Type: message`` of an exception a producer raised, for a rule's message."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, KeyboardInterrupt) and not watch.watching:
        text += (
            " (reported as the producer's: no SIGINT handler of the checker was active to "
            "tell it from a Ctrl-C)"
        )
    return text
