"""The hand-written entries and the buffer layout memo answer as the full
paths do.

``DLPackArray.__dlpack__`` reads its keywords by hand (src/dlpackarray/
_fast_entries.pyx); a buffer export remembers the request-independent part of
the layout (_buffer.pyx, BufferLayout).  Each is checked here against what
the declared signature or a fresh array answers: every keyword combination
and order, at call sites reached twice, and every sequence of buffer requests
against a fresh array's answer to each.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from buffers import (
    PyBUF_ANY_CONTIGUOUS,
    PyBUF_C_CONTIGUOUS,
    PyBUF_F_CONTIGUOUS,
    PyBUF_FORMAT,
    PyBUF_FULL_RO,
    PyBUF_ND,
    PyBUF_RECORDS_RO,
    PyBUF_SIMPLE,
    PyBUF_STRIDES,
    PyBUF_WRITABLE,
    get_buffer,
)
from conftest import require
from dlpack_ctypes import capsule_name, tensor_fields
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray

IS_COPIED = 1 << 1
READ_ONLY = 1 << 0

MAX_VERSIONS = [None, (0, 1), (1, 0), (1, 3), (2, 0), (1, "x"), [1, 0], (1,), (10**30, 0)]
KEYWORDS = {
    "stream": [None, -1, 5],
    "max_version": MAX_VERSIONS,
    "dl_device": [None, (1, 0)],
    "copy": [None, True],
}


def expected(readonly: bool, kwargs: dict):
    """What __dlpack__ answers for CPU data, from the spec's rules."""
    mv = kwargs.get("max_version")
    if mv is not None and (
        type(mv) is not tuple or len(mv) != 2 or not all(isinstance(x, int) for x in mv)
    ):
        return TypeError
    versioned = mv is not None and mv[0] >= 1
    if kwargs.get("stream") not in (None, -1):
        return ValueError
    copied = kwargs.get("copy") is True
    readonly = readonly and not copied  # a copy is fresh, writable memory
    if readonly and not versioned:
        return BufferError
    flags = (IS_COPIED if copied else 0) | (READ_ONLY if readonly else 0)
    return ("dltensor_versioned" if versioned else "dltensor", flags if versioned else None)


def answer(call, x):
    try:
        cap = call(x)
    except Exception as exc:  # noqa: BLE001 -- the error type is the answer
        return type(exc)
    fields = tensor_fields(cap)
    return (capsule_name(cap), fields.get("flags"))


def call_site(kwargs: dict):
    """A function whose one call site passes ``kwargs`` as literal keywords, in
    this order, so that the interpreter hands over one constant kwnames tuple
    and one constant max_version tuple on every call."""
    names = list(kwargs)
    src = "def f(x, {}):\n    return x.__dlpack__({})\n".format(
        ", ".join(names), ", ".join(f"{n}={n}" for n in names)
    )
    ns: dict = {}
    exec(compile(src, "<call site>", "exec"), ns)  # noqa: S102 -- test-made source
    return lambda x: ns["f"](x, **kwargs)


def test_every_keyword_order_and_value_at_a_call_site_reached_twice():
    sources = [np.arange(6.0), np.arange(6.0)]
    sources[1].flags.writeable = False
    checked = 0
    for r in range(len(KEYWORDS) + 1):
        for names in itertools.permutations(KEYWORDS, r):
            for values in itertools.product(*(KEYWORDS[n] for n in names)):
                kwargs = dict(zip(names, values, strict=True))
                call = call_site(kwargs)
                for src in sources:
                    x = DLPackArray(src)
                    want = expected(not src.flags.writeable, kwargs)
                    # The same constant tuples twice: both answers agree.
                    assert answer(call, x) == want, kwargs
                    assert answer(call, x) == want, kwargs
                    checked += 1
    assert checked > 1000


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.tuples(st.integers(-3, 2**70), st.integers(-3, 2**70)),
        st.tuples(st.booleans(), st.booleans()),
        st.tuples(st.integers(0, 3), st.one_of(st.floats(), st.text(max_size=2))),
        st.lists(st.integers(0, 3), max_size=3),
        st.tuples(st.integers(0, 3)),
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    )
)
def test_any_max_version_gets_the_spec_rules_answer(max_version):
    """The entry's shortcut for the commonest request agrees with the full
    check for every max_version value: a (major, minor) tuple of ints, major
    >= 1 versioned, anything else TypeError."""
    x = DLPackArray(np.arange(3.0))
    assert answer(lambda a: a.__dlpack__(max_version=max_version), x) == expected(
        False, {"max_version": max_version}
    )


def test_each_max_version_tuple_is_judged_on_its_own():
    """A tuple seen before never decides the answer for another one."""
    x = DLPackArray(np.arange(3.0))
    for _ in range(3):
        assert capsule_name(x.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
        assert capsule_name(x.__dlpack__(max_version=(0, 9))) == "dltensor"
        assert capsule_name(x.__dlpack__()) == "dltensor"
        for bad in ((1, 2, 3), (1.0, 0), ("1", 0)):
            try:
                x.__dlpack__(max_version=bad)
            except TypeError:
                pass
            else:
                raise AssertionError(f"max_version={bad!r} was accepted")
    # Tuples built at run time (a new object each call) take the full check.
    for major in range(0, 4):
        want = "dltensor_versioned" if major >= 1 else "dltensor"
        assert capsule_name(x.__dlpack__(max_version=(major, int("0")))) == want


FLAGS = [
    PyBUF_SIMPLE,
    PyBUF_SIMPLE | PyBUF_FORMAT,
    PyBUF_WRITABLE,
    PyBUF_ND,
    PyBUF_ND | PyBUF_FORMAT,
    PyBUF_STRIDES,
    PyBUF_C_CONTIGUOUS,
    PyBUF_F_CONTIGUOUS,
    PyBUF_ANY_CONTIGUOUS,
    PyBUF_RECORDS_RO,
    PyBUF_RECORDS_RO | PyBUF_WRITABLE,
    PyBUF_FULL_RO,
]


def _sources():
    base = np.arange(24, dtype=np.int16).reshape(4, 6)
    ro = np.arange(6.0)
    ro.flags.writeable = False
    return {
        "c": base,
        "f": np.asfortranarray(base),
        "strided": base[:, ::2],
        "0-d": np.array(3.5),
        "readonly": ro,
        "bool": np.array([True, False]),
        "bfloat16": np.arange(4, dtype=ml_dtypes.bfloat16),
        "bfloat16-strided": np.arange(8, dtype=ml_dtypes.bfloat16)[::2],
        "broadcast": np.broadcast_to(np.arange(3.0), (5, 3)),
    }


def buffer_answer(x, flags):
    try:
        info = get_buffer(x, flags)
    except Exception as exc:  # noqa: BLE001 -- the error is the answer
        return (type(exc), str(exc))
    info.pop("buf")
    return info


@settings(max_examples=200, deadline=None)
@given(
    source=st.sampled_from(sorted(_sources())),
    requests=st.lists(st.sampled_from(FLAGS), min_size=1, max_size=6),
)
def test_buffer_requests_in_any_order_answer_as_on_a_fresh_array(source, requests):
    src = _sources()[source]
    x = DLPackArray(src)
    for flags in requests:
        assert buffer_answer(x, flags) == buffer_answer(DLPackArray(src), flags), flags


def _device_method_reference(requested_schema=None, *, copy=None, **kwargs):
    """The signature the Arrow device methods declare, bound by Python itself."""
    return requested_schema, copy, kwargs


ARROW_CALLS = [
    ((), {}),
    ((None,), {}),
    ((None, None), {}),
    ((), {"requested_schema": None}),
    ((None,), {"requested_schema": None}),
    ((), {"copy": None}),
    ((), {"copy": True}),
    ((), {"copy": False}),
    ((None,), {"copy": None, "future": None}),
    ((), {"future": None, "later": None}),
    ((), {"future": 1}),
    ((), {"copy": None, "future": None, "other": "x"}),
    ((), {"requested_schema": None, "copy": True, "future": None}),
]


@given(st.sampled_from(ARROW_CALLS), st.booleans(), st.booleans())
def test_arrow_device_methods_bind_their_arguments_as_declared(call, stream, strided):
    """The hand-written argument handling of __arrow_c_device_array__ and
    __arrow_c_device_stream__ (_fast_entries.pyx) answers every call as the
    declared signature ``(requested_schema=None, *, copy=None, **kwargs)``
    does: TypeError where Python's binding fails, NotImplementedError for a
    future keyword that is not None, else the export (a copy only if asked
    for or needed)."""
    args, kwargs = call
    a = np.arange(12, dtype=np.int32)
    if strided:
        a = a[::2]
    d = DLPackArray(a)
    method = d.__arrow_c_device_stream__ if stream else d.__arrow_c_device_array__
    try:
        _, copy, extra = _device_method_reference(*args, **kwargs)
    except TypeError:
        with pytest.raises(TypeError, match=method.__name__):
            method(*args, **kwargs)
        return
    refused = sorted(k for k, v in extra.items() if v is not None)
    if refused:
        with pytest.raises(NotImplementedError, match=str(refused).replace("[", r"\[")):
            method(*args, **kwargs)
        return
    if copy is False and strided:
        with pytest.raises(BufferError):
            method(*args, **kwargs)
        return
    out = method(*args, **kwargs)
    if stream:
        assert capsule_name(out) == "arrow_device_array_stream"
    else:
        schema, array = out
        pa = require("pyarrow", "imports the exported Arrow device array to compare it")
        arr = pa.Array._import_from_c_device_capsule(schema, array)
        np.testing.assert_array_equal(arr.to_numpy(), a)


def _kwnames_of(fn):
    """The constant kwnames tuple of ``fn``'s one keyword call."""
    return next(c for c in fn.__code__.co_consts if isinstance(c, tuple) and "copy" in c)


def test_dlpack_keeps_no_reference_to_its_arguments():
    """__dlpack__ borrows its arguments for the call only: a max_version tuple
    and a kwnames tuple, whatever call sites came before, hold no more
    references after the call than before it."""
    import sys

    x = DLPackArray(np.arange(3.0))
    for i in range(8):  # other call sites first
        ns: dict = {}
        exec(f"def f(x): return x.__dlpack__(max_version=(1, {i + 10}), copy=None)", ns)  # noqa: S102
        ns["f"](x)
    ns = {}
    exec("def late(x, v): return x.__dlpack__(max_version=v, copy=None)", ns)  # noqa: S102
    late = ns["late"]
    version = (1, int("3"))  # built at run time: only this frame holds it
    names = _kwnames_of(late)
    before = sys.getrefcount(version), sys.getrefcount(names)
    for _ in range(3):
        assert capsule_name(late(x, version)) == "dltensor_versioned"
    assert (sys.getrefcount(version), sys.getrefcount(names)) == before
