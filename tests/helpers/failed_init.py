"""An array whose initialisation failed: how to make one without losing it to
the exception, and the repr it must report afterwards (a failed ``__init__``
leaves an object that answers, never one that crashes or pretends to hold
data).
"""

from __future__ import annotations

import pytest

from dlpackarray import DLPackArray

FAILED = "<DLPackArray (initialisation failed)>"


def failed_init(source, **kwargs):
    """Initialises through __new__ + __init__ and returns (array, exception)."""
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(BaseException) as info:
        a.__init__(source, **kwargs)
    return a, info.value
