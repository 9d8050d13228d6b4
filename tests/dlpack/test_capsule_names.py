"""A capsule's name decides how it is read, whoever set it.

view_from_capsule reads the name once and compares it with each DLPack name
(no PyCapsule_IsValid per candidate).  Pinned here: every near-miss, the
empty and NULL names, names in buffers of their own (equal text, another
address), and names set or re-set by someone else after the capsule was
made, including one renamed "used" by another consumer.
"""

from __future__ import annotations

import ctypes

import dlpack_ctypes as dc
import numpy as np
import pytest
from conftest import assert_clean_exit, run_python

from dlpackarray import DLPackArray

_api = ctypes.PyDLL(None)
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

# Names must outlive their capsules: kept for the whole run.
_NAMES: list = []


def _name(text):
    if text is None:
        return None
    buf = ctypes.create_string_buffer(text)
    _NAMES.append(buf)
    return buf


def _capsule(p, text):
    """``p``'s tensor in a capsule named ``text`` (None: a NULL name), in a buffer
    of its own, so the name never shares our constants' address."""
    p._made = True
    name = _name(text)
    return _api.PyCapsule_New(p.address, None if name is None else ctypes.addressof(name), None)


def _rename(capsule, text):
    name = _name(text)
    assert _api.PyCapsule_SetName(capsule, None if name is None else ctypes.addressof(name)) == 0


NOT_DLPACK = [
    None, b"", b"dltenso", b"dltensor_", b"dltensor_versione", b"dltensor_versioned_",
    b"dltensor_versioned2", b"DLTENSOR", b"Dltensor_versioned", b" dltensor", b"not_a_tensor",
    b"used_dltensor_", b"used_", b"dltensor\xff",
]  # fmt: skip


def _expect_foreign(text):
    shown = None if text is None else text.decode(errors="replace")
    return f"a PyCapsule named {shown!r} is not a DLPack tensor capsule"


@pytest.mark.parametrize("text", NOT_DLPACK, ids=repr)
@pytest.mark.parametrize("versioned", [True, False])
def test_names_that_are_not_dlpacks_are_refused_untouched(text, versioned):
    p = dc.Producer(np.arange(3.0), versioned=versioned)
    cap = _capsule(p, text)
    with pytest.raises(TypeError) as info:
        DLPackArray(cap)
    assert str(info.value).startswith(_expect_foreign(text))
    assert p.deleter_calls == 0  # not ours: neither adopted nor released
    assert dc._api.PyCapsule_GetName(cap) == text


@pytest.mark.parametrize("text", [b"used_dltensor", b"used_dltensor_versioned"])
def test_used_names_are_refused_as_consumed(text):
    p = dc.Producer(np.arange(3.0), versioned=text.endswith(b"versioned"))
    cap = _capsule(p, text)
    consumed = f"this DLPack capsule \\('{text.decode()}'\\) has already been consumed"
    with pytest.raises(ValueError, match=consumed):
        DLPackArray(cap)
    assert p.deleter_calls == 0


@pytest.mark.parametrize("versioned", [True, False])
def test_dlpack_names_in_a_buffer_of_their_own_are_read(versioned):
    p = dc.Producer(np.arange(3.0), versioned=versioned)
    cap = _capsule(p, b"dltensor_versioned" if versioned else b"dltensor")
    a = DLPackArray(cap)
    assert a.tolist() == [0.0, 1.0, 2.0]
    assert dc.capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    del a
    assert p.deleter_calls == 0  # the capsule owns the tensor now
    del cap
    assert p.deleter_calls == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_a_name_set_by_someone_else_decides(versioned):
    wanted = b"dltensor_versioned" if versioned else b"dltensor"
    # Made under a foreign name, then given the right one.
    p = dc.Producer(np.arange(3.0), versioned=versioned)
    cap = _capsule(p, b"not_a_tensor")
    _rename(cap, wanted)
    assert DLPackArray(cap).tolist() == [0.0, 1.0, 2.0]
    assert dc.capsule_name(cap) == "used_" + wanted.decode()
    del cap
    assert p.deleter_calls == 1
    # Made under the right name, then renamed by another consumer.
    p = dc.Producer(np.arange(3.0), versioned=versioned)
    cap = _capsule(p, wanted)
    _rename(cap, b"used_" + wanted)
    with pytest.raises(ValueError, match="already been consumed"):
        DLPackArray(cap)
    assert p.deleter_calls == 0
    # Made under the right name, then renamed to a NULL name.
    p = dc.Producer(np.arange(3.0), versioned=versioned)
    cap = _capsule(p, wanted)
    _rename(cap, None)
    with pytest.raises(TypeError, match="a PyCapsule named None"):
        DLPackArray(cap)
    assert p.deleter_calls == 0


# The consumer remembers the address of the last "dltensor_versioned" name it
# read (producers name every capsule with one string literal) and lets
# PyCapsule_GetPointer's own comparison prove the text at that address.  The
# text is what counts: one buffer, read as versioned once, then rewritten in
# place under the same address.  In a child: a consumer that trusted the
# address would read a legacy tensor as a versioned one and could crash.
_REUSED_ADDRESS_SCRIPT = """
import ctypes
import numpy as np
import dlpack_ctypes as dc
from dlpackarray import DLPackArray

api = ctypes.PyDLL(None)
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
reused = ctypes.create_string_buffer(32)

def capsule(p, text):
    ctypes.memset(reused, 0, len(reused))
    ctypes.memmove(reused, text, len(text))
    p._made = True
    return api.PyCapsule_New(p.address, ctypes.addressof(reused), None)

def prime():
    p = dc.Producer(np.arange(2.0), versioned=True)
    cap = capsule(p, b"dltensor_versioned")
    assert DLPackArray(cap).tolist() == [0.0, 1.0]
    del cap
    assert p.deleter_calls == 1

prime()
p = dc.Producer(np.arange(4.0), versioned=False)
cap = capsule(p, b"dltensor")
a = DLPackArray(cap)
assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
assert dc.capsule_name(cap) == "used_dltensor"
del a, cap
assert p.deleter_calls == 1

for text in TEXTS:
    prime()
    p = dc.Producer(np.arange(3.0), versioned=True)
    cap = capsule(p, text)
    try:
        DLPackArray(cap)
    except TypeError as e:
        shown = text.decode(errors="replace")
        assert str(e).startswith(f"a PyCapsule named {shown!r} is not a DLPack"), e
        assert e.__context__ is None, e.__context__  # the failed comparison left no error
    else:
        raise AssertionError(f"{text!r} was read")
    assert p.deleter_calls == 0
    del cap
    # The same address, the right text again: read as before.
    q = dc.Producer(np.arange(3.0), versioned=True)
    cap = capsule(q, b"dltensor_versioned")
    assert DLPackArray(cap).tolist() == [0.0, 1.0, 2.0]
print("read by text", len(TEXTS))
"""


def test_a_remembered_name_address_is_read_by_its_text():
    texts = [t for t in NOT_DLPACK if t is not None]
    proc = run_python(f"TEXTS = {texts!r}\n" + _REUSED_ADDRESS_SCRIPT)
    assert_clean_exit(proc)
    assert f"read by text {len(texts)}" in proc.stdout
