"""A DLPackArray is initialised once and immutable after.

An object made by ``DLPackArray.__new__`` alone, one whose ``__init__`` is
still running (re-entered from the source's own code) and one whose
``__init__`` failed are refused with ValueError by every member, protocol slot
and C entry point; a second ``__init__`` raises TypeError in every state.  The
members are enumerated from the class, so a new one is covered (or this file
fails) without editing it.  Such an object must not answer as an empty uint8
vector, and an array without an owner (an empty Arrow stream,
``DLPackArray_FromData`` without an owner) must not be re-initialised under
the DLTensors and buffers it has lent: that would be out-of-bounds reads.
"""

from __future__ import annotations

import copy
import ctypes
import inspect
import operator
import pickle
import sys
import textwrap
import types

import c_api_ctypes as capi
import dlpack_ctypes as dc
import exchange_ctypes as ex
import numpy as np
import pytest
from c_api_ctypes import from_data_prototype
from conftest import assert_clean_exit, require, run_python

import dlpackarray
from dlpackarray import DLPackArray, _dask, from_dlpack
from dlpackarray._array import require_ready

NEW = "not initialised: it was made by __new__"
FAILED = "not initialised: its __init__ failed"
TWICE = "DLPackArray is immutable: it cannot be initialised twice"

# A 4 EiB broadcast view of one byte: copying it raises MemoryError.
HUGE = "DLPackArray.from_buffer(bytes(1), 'uint8', shape=(2**62,), strides=(0,))"


def _new():
    return DLPackArray.__new__(DLPackArray)


def _failed_refusal():
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(BufferError):
        a.__init__(bytearray(8), device=(2, 0))  # no move to CUDA
    return a


def _failed_memory():
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(MemoryError):
        a.__init__(eval(HUGE), copy=True)
    return a


def _failed_unsupported():
    a = DLPackArray.__new__(DLPackArray)
    with pytest.raises(TypeError):
        a.__init__(object())
    return a


class NoSuperInit(DLPackArray):
    """A subclass whose __init__ never reaches DLPackArray.__init__."""

    def __init__(self):
        pass


# state name -> (maker, what the error says)
NOT_READY = {
    "new": (_new, NEW),
    "subclass_without_init": (NoSuperInit, NEW),
    "failed_refusal": (_failed_refusal, FAILED),
    "failed_memory": (_failed_memory, FAILED),
    "failed_unsupported": (_failed_unsupported, FAILED),
}

# Members of the class that do not read an instance's data; each is checked
# by a test of its own below.
NOT_READS = {
    "__new__",
    "__init__",  # test_second_init_is_refused_in_every_state
    "__doc__",
    "__dlpack_c_exchange_api__",  # a class constant; its functions: OPERATIONS
    "from_buffer",  # a static constructor
    "__repr__",  # names the state instead of raising
}

# Arguments a method needs to get past its own argument parsing.  Python
# 3.12+ lists the buffer slot as ``__buffer__(flags)`` (PEP 688): 0 is
# PyBUF_SIMPLE, a request every initialised array grants.
ARGS = {
    "__getitem__": (0,),
    "__contains__": (0,),
    "view": ("uint8",),
    "__reduce_ex__": (5,),
    "__deepcopy__": ({},),
    "__buffer__": (0,),
}


def members():
    """Every member DLPackArray defines that reads the instance."""
    return sorted(n for n in vars(DLPackArray) if n not in NOT_READS)


def _use_member(a, name):
    attr = vars(DLPackArray)[name]
    if isinstance(attr, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
        return getattr(a, name)
    return getattr(a, name)(*ARGS.get(name, ()))


def test_member_list_is_the_class():
    names = members()
    # The enumeration must see the whole class, protocol slots included.
    assert len(names) >= 40, names
    for expected in (
        "__dlpack__",
        "__array_interface__",
        "__arrow_c_stream__",
        "__len__",
        "__getitem__",
        "__index__",
        "shape",
        "reshape",
        "copy",
        "tolist",
        "T",
    ):
        assert expected in names
    assert set(vars(DLPackArray)) - set(names) == NOT_READS


@pytest.mark.parametrize("name", sorted(set(ARGS) & set(members())))
def test_member_arguments_are_accepted_by_a_ready_array(name):
    # The refusals below come from the state, not from arguments the member
    # would reject anyway.
    _use_member(DLPackArray(np.arange(4, dtype=np.uint8)), name)


@pytest.mark.parametrize("name", members())
@pytest.mark.parametrize("state", sorted(NOT_READY))
def test_every_member_refuses_an_array_that_is_not_ready(state, name):
    make, message = NOT_READY[state]
    a = make()
    with pytest.raises(ValueError, match=message):
        _use_member(a, name)


class _CAPI(ctypes.Structure):
    """DLPackArray_CAPI of dlpackarray.h."""

    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("size", ctypes.c_size_t),
        ("type", ctypes.c_void_p),
        ("check", ctypes.c_void_p),
        ("from_object", ctypes.c_void_p),
        ("from_data", ctypes.c_void_p),
        ("from_managed_versioned", ctypes.c_void_p),
        ("from_managed_legacy", ctypes.c_void_p),
        ("get_dltensor", ctypes.c_void_p),
        ("to_managed_versioned", ctypes.c_void_p),
        ("to_capsule", ctypes.c_void_p),
    ]


_TABLE = _CAPI.from_address(dc._api.PyCapsule_GetPointer(dlpackarray._C_API, b"dlpackarray._C_API"))
C_GET_DLTENSOR = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(dc.DLTensor), ctypes.POINTER(ctypes.c_int)
)(_TABLE.get_dltensor)
C_TO_MANAGED = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(_TABLE.to_managed_versioned)
C_TO_CAPSULE = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_int)(
    _TABLE.to_capsule
)
C_FROM_DATA = from_data_prototype(ctypes.c_void_p)(_TABLE.from_data)  # owner NULL here
C_FROM_OBJECT = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.py_object, ctypes.c_int, ctypes.c_void_p
)(_TABLE.from_object)
EXCHANGE = ex.Functions(DLPackArray.__dlpack_c_exchange_api__)


def _exchange_dltensor(a):
    t = dc.DLTensor()
    EXCHANGE.dltensor_from_py(a, ctypes.byref(t))
    return t


def _exchange_managed(a):
    out = ctypes.c_void_p()
    EXCHANGE.from_py(a, ctypes.byref(out))
    ex.call_deleter(out.value)  # only reached if the array was (wrongly) exported


def _c_get_dltensor(a):
    t, ro = dc.DLTensor(), ctypes.c_int()
    C_GET_DLTENSOR(a, ctypes.byref(t), ctypes.byref(ro))
    return t


def _c_to_managed(a):
    ex.call_deleter(C_TO_MANAGED(a))


# The ways Python, consumers and C reach an array's protocol slots.
OPERATIONS = {
    "memoryview": memoryview,
    "bytes": bytes,
    "len": len,
    "bool": bool,
    "int": int,
    "float": float,
    "complex": complex,
    "operator.index": operator.index,
    "getitem": lambda a: a[...],
    "iter": list,
    "DLPackArray": DLPackArray,
    "DLPackArray_copy": lambda a: DLPackArray(a, copy=True),
    "from_dlpack": from_dlpack,
    "numpy.asarray": np.asarray,
    "numpy.from_dlpack": np.from_dlpack,
    "exchange.dltensor_from_py_object": _exchange_dltensor,
    "exchange.managed_tensor_from_py_object": _exchange_managed,
    "capi.GetDLTensor": _c_get_dltensor,
    "capi.ToManagedVersioned": _c_to_managed,
    "capi.ToCapsule": lambda a: C_TO_CAPSULE(a, 1),
    "capi.FromObject": lambda a: C_FROM_OBJECT(a, -1, None),
    "capi.FromObjectOnStream": lambda a: capi.from_object_on_stream(a, 0),
    "capi.IsContiguous": lambda a: capi.table().is_contiguous(a, b"C"),
    "capi.AsContiguous": lambda a: capi.table().as_contiguous(a),
    "capi.Converter": lambda a: _c_convert(a),
    "pickle.dumps": lambda a: [pickle.dumps(a, protocol=p) for p in range(6)],
    "copy.copy": copy.copy,
    "copy.deepcopy": copy.deepcopy,
    "dask.sizeof": lambda a: _dask_sizeof(a),
    "dask_serialize": lambda a: _dask.dask_serialize(a),
    "require_ready": require_ready,
}

# What each member of the C API table (tests/helpers/c_api_ctypes.py) is to an array
# that is not ready: an OPERATIONS entry that must refuse it, or why none.
C_API_MEMBERS = {
    "check": "a type check: it answers what the object is, and reads nothing",
    "from_object": "capi.FromObject",
    "from_data": "makes a new array from C memory; takes no array",
    "from_managed_versioned": "adopts a DLPack tensor; takes no array",
    "from_managed_legacy": "adopts a DLPack tensor; takes no array",
    "get_dltensor": "capi.GetDLTensor",
    "to_managed_versioned": "capi.ToManagedVersioned",
    "to_capsule": "capi.ToCapsule",
    "empty": "allocates a new array; takes no array",
    "is_contiguous": "capi.IsContiguous",
    "as_contiguous": "capi.AsContiguous",
    "converter": "capi.Converter",
    "from_object_on_stream": "capi.FromObjectOnStream",
}

# The hooks dlpackarray._dask hands to Dask: the OPERATIONS entry that calls
# each, or why it takes no array.
DASK_HOOKS = {
    "register": "the entry point itself: takes Dask's sizeof dispatcher, takes no array",
    "sizeof_array": "dask.sizeof",
    "dask_serialize": "dask_serialize",
    "dask_deserialize": "makes a new array from a header and frames; takes no array",
}


def _c_convert_cleanup(slot):
    """The converter's second call, obj == NULL: it drops what it stored."""
    address = ctypes.cast(capi.table().converter, ctypes.c_void_p).value
    cleanup = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(address)
    assert cleanup(None, ctypes.addressof(slot)) == 1


def _c_convert(a):
    """DLPackArray_Converter as PyArg_ParseTuple's "O&" calls it; what it stored
    (a new reference) is released by the cleanup call, as the contract says."""
    slot = ctypes.py_object()
    converter = capi.table().converter
    if converter(a, ctypes.addressof(slot)) == 0:
        raise AssertionError("the converter failed without an exception")
    _c_convert_cleanup(slot)  # Py_CLEANUP_SUPPORTED: drops the reference
    return True


def _dask_sizeof(a):
    sizeof = require("dask", "its sizeof dispatch is an entry point").sizeof.sizeof
    return sizeof(a)


@pytest.mark.parametrize("op", sorted(OPERATIONS))
@pytest.mark.parametrize("state", sorted(NOT_READY))
def test_every_protocol_route_refuses_an_array_that_is_not_ready(state, op):
    make, message = NOT_READY[state]
    with pytest.raises(ValueError, match=message):
        OPERATIONS[op](make())


def test_every_c_api_member_is_accounted_for():
    """Each member of the C API table either has an OPERATIONS entry, which
    must refuse an array that is not ready, or takes no array at all: a new
    member fails here until it is placed."""
    fields = [name for name, _ in capi.Table._fields_][4:]  # after major, minor, size, type
    assert sorted(fields) == sorted(C_API_MEMBERS)
    for name, use in C_API_MEMBERS.items():
        assert use in OPERATIONS or "takes no array" in use or name == "check", name


def test_every_dask_hook_is_accounted_for():
    """Every public function of dlpackarray._dask either refuses an array that
    is not ready (through its OPERATIONS entry) or takes no array."""
    hooks = sorted(
        name
        for name, value in vars(_dask).items()
        if inspect.isfunction(value)
        and not name.startswith("_")
        and value.__module__ == _dask.__name__
    )
    assert hooks == sorted(DASK_HOOKS)
    for name, use in DASK_HOOKS.items():
        assert use in OPERATIONS or "takes no array" in use, name


def test_a_not_ready_array_is_a_dlpackarray_to_the_type_check():
    """DLPackArray_Check answers the type only (it reads nothing), so it accepts
    an array that is not ready; every reading member then refuses it."""
    check = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object)(capi.table().check)
    assert check(_new()) == 1 and check(object()) == 0


def test_converter_passes_a_ready_array_through():
    """The converter stores a ready DLPackArray itself, with a new reference
    that its cleanup call drops again."""
    a = DLPackArray(b"abc")
    slot = ctypes.py_object()
    before = sys.getrefcount(a)
    assert capi.table().converter(a, ctypes.addressof(slot)) != 0
    assert sys.getrefcount(a) == before + 1  # the reference the slot holds
    assert slot.value is a
    _c_convert_cleanup(slot)
    assert sys.getrefcount(a) == before


@pytest.mark.parametrize("consumer", ["torch", "pyarrow", "jax"])
def test_foreign_consumers_get_the_error(consumer):
    mod = require(consumer, "the consumer that must see the not-ready error")
    convert = {
        "torch": lambda a: mod.from_dlpack(a),
        "pyarrow": lambda a: mod.array(a),
        "jax": lambda a: mod.numpy.from_dlpack(a),
    }[consumer]
    with pytest.raises(ValueError, match=NEW):
        convert(_new())


def test_repr_names_the_state():
    assert repr(_new()) == "<DLPackArray (uninitialised)>"
    assert repr(NoSuperInit()) == "<NoSuperInit (uninitialised)>"
    assert repr(_failed_refusal()) == "<DLPackArray (initialisation failed)>"
    assert str(_failed_memory()) == "<DLPackArray (initialisation failed)>"
    assert repr(DLPackArray(b"ab")).startswith("DLPackArray(shape=(2,)")


def test_pickling_refuses_a_not_ready_array():
    import pickle

    for a in (_new(), _failed_refusal()):
        with pytest.raises(ValueError, match="not initialised|initialisation failed"):
            pickle.dumps(a, protocol=5)
    assert pickle.loads(pickle.dumps(DLPackArray(b"ab"))).tolist() == [97, 98]


def test_static_constructor_through_an_uninitialised_instance():
    a = _new().from_buffer(b"abcd", "uint8", shape=(2, 2))
    assert a.shape == (2, 2) and a.tolist() == [[97, 98], [99, 100]]


@pytest.mark.parametrize("state", sorted(NOT_READY))
def test_second_init_is_refused_in_every_state(state):
    make, message = NOT_READY[state]
    a = make()
    if state in ("new", "subclass_without_init"):
        # The only state __init__ accepts; once.
        DLPackArray.__init__(a, b"abc")
        assert a.tolist() == [97, 98, 99]
        with pytest.raises(TypeError, match=f"^{TWICE}$"):
            DLPackArray.__init__(a, b"zz")
        assert a.tolist() == [97, 98, 99]
        return
    with pytest.raises(TypeError, match=rf"{TWICE} \(its first initialisation failed\)"):
        a.__init__(b"abc")
    with pytest.raises(ValueError, match=message):
        a.shape  # noqa: B018 -- still unusable


def _empty_chunked_array():
    pa = require("pyarrow", "these tests exchange data with it")
    return DLPackArray(pa.chunked_array([], type=pa.float64()))


def _empty_nanoarrow_stream():
    na = require("nanoarrow", "these tests exchange data with it")
    return DLPackArray(na.c_array_stream([], na.float64()))


_FROM_DATA_KEEP = []


def _from_data_without_owner():
    buf = (ctypes.c_double * 4)(1.0, 2.0, 3.0, 4.0)
    _FROM_DATA_KEEP.append(buf)  # the caller keeps the memory alive (no owner)
    shape = (ctypes.c_int64 * 1)(4)
    return C_FROM_DATA(
        ctypes.addressof(buf),
        1,
        shape,
        None,
        dc.DLDataType(2, 64, 1),
        dc.DLDevice(1, 0),
        0,
        None,
        None,
        None,
    )


def _from_data_empty():
    shape = (ctypes.c_int64 * 1)(0)
    return C_FROM_DATA(
        None, 1, shape, None, dc.DLDataType(2, 64, 1), dc.DLDevice(1, 0), 0, None, None, None
    )


# Every construction path; each must leave a ready array that refuses a
# second __init__.  The first three have no owner (item 9).
CONSTRUCTORS = {
    "empty_chunked_array": _empty_chunked_array,
    "empty_nanoarrow_stream": _empty_nanoarrow_stream,
    "capi_from_data_no_owner": _from_data_without_owner,
    "capi_from_data_empty": _from_data_empty,
    "capi_from_object": lambda: C_FROM_OBJECT(np.arange(4.0), -1, None),
    "python_init": lambda: DLPackArray(np.arange(4.0)),
    "capsule": lambda: DLPackArray(np.arange(4.0).__dlpack__(max_version=(1, 3))),
    "from_dlpack": lambda: from_dlpack(np.arange(4.0)),
    "from_buffer": lambda: DLPackArray.from_buffer(bytearray(32), "float64"),
    "copy": lambda: DLPackArray(np.arange(4.0)).copy(),
    "copy_true": lambda: DLPackArray(np.arange(4.0), copy=True),
    "view": lambda: DLPackArray(np.arange(4.0))[1:],
    "reshape": lambda: DLPackArray(np.arange(4.0)).reshape(2, 2),
    "exchange_to_py": lambda: EXCHANGE.to_py(EXCHANGE.managed(np.arange(4.0))),
}


@pytest.mark.parametrize("how", sorted(CONSTRUCTORS))
def test_arrays_of_every_construction_path_are_immutable(how):
    a = CONSTRUCTORS[how]()
    before = (a.shape, a.strides, a.data_ptr, a.tolist())
    # Lent out first: a C consumer holds a DLTensor pointing into the array's
    # descriptor, and Python a buffer.
    borrowed = _c_get_dltensor(a)
    m = memoryview(a)
    with pytest.raises(TypeError, match=f"^{TWICE}$"):
        a.__init__(np.arange(1000.0))
    with pytest.raises(TypeError, match=f"^{TWICE}$"):
        DLPackArray.__init__(a, bytearray(64), copy=True)
    assert (a.shape, a.strides, a.data_ptr, a.tolist()) == before
    assert borrowed.ndim == len(before[0])
    assert [borrowed.shape[i] for i in range(borrowed.ndim)] == list(before[0])
    assert m.shape == before[0] and m.tolist() == before[3]
    m.release()


# -- re-entrancy, each in a subprocess (a failure corrupts the heap) ----------

PRELUDE = f"""
import gc
import numpy as np
from dlpackarray import DLPackArray

NOT_YET = "not initialised yet: its __init__ is still running"
FAILED = {FAILED!r}
# What reinit() logs: the second __init__'s TypeError, then the read's ValueError.
RUNNING = {TWICE!r} + " (its first initialisation is still running)"
AFTER_FAILURE = {TWICE!r} + " (its first initialisation failed)"
NOT_YET_READ = ("this DLPackArray is " + NOT_YET + " (code the source runs during the "
                "import cannot use the array being imported into)")
FAILED_READ = "this DLPackArray is " + FAILED + "; create a new DLPackArray"
log = []

def reinit(target):
    '''What a hostile source does: initialise the array it is imported into.'''
    try:
        target.__init__(bytearray(16))
    except TypeError as e:
        log.append(str(e))
    else:
        log.append("re-initialised")
    try:
        target.shape
    except ValueError as e:
        log.append(str(e))
    else:
        log.append("readable")

def assert_failed(a):
    for use in (lambda: a.shape, lambda: memoryview(a), lambda: a.__dlpack__(),
                lambda: a.tolist(), lambda: len(a)):
        try:
            use()
        except ValueError as e:
            assert FAILED in str(e), e
        else:
            raise AssertionError("a failed array answered")
"""

REENTRANT = {
    # The case: a huge copy fails with MemoryError, and dropping the
    # source's memory runs its __del__, which re-initialises the array.
    "del_after_memory_error": f"""
        class Src:
            def __init__(self, target):
                self.target = target
                self.base = {HUGE}
            @property
            def __array_interface__(self):
                return self.base.__array_interface__
            def __del__(self):
                reinit(self.target)

        a = DLPackArray.__new__(DLPackArray)
        try:
            a.__init__(Src(a), copy=True)
        except MemoryError:
            pass
        else:
            raise AssertionError("no MemoryError")
        gc.collect()
        assert log == [AFTER_FAILURE, FAILED_READ], log
        assert_failed(a)
    """,
    # An object the source hands over dies during the import.
    "del_during_import": """
        class Bomb:
            def __init__(self, target):
                self.target = target
            def __del__(self):
                reinit(self.target)

        class Src:
            def __init__(self, target):
                self.target = target
                self.data = np.arange(6.0)
            @property
            def __array_interface__(self):
                d = dict(self.data.__array_interface__)
                d["dlpackarray_test_bomb"] = Bomb(self.target)
                return d

        a = DLPackArray.__new__(DLPackArray)
        a.__init__(Src(a))
        gc.collect()
        assert log == [RUNNING, NOT_YET_READ], log
        assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """,
    "dlpack": """
        class Src:
            def __init__(self, target):
                self.target = target
            def __dlpack__(self, **kwargs):
                reinit(self.target)
                return np.arange(3.0).__dlpack__(**kwargs)

        a = DLPackArray.__new__(DLPackArray)
        a.__init__(Src(a))
        assert log == [RUNNING, NOT_YET_READ], log
        assert a.tolist() == [0.0, 1.0, 2.0]
    """,
    "index_then_failure": """
        class Dim:
            def __init__(self, target):
                self.target = target
            def __index__(self):
                reinit(self.target)
                return -5  # refused: the import fails after the re-entry

        class Src:
            def __init__(self, target):
                self.target = target
                self.data = np.arange(6.0)
            @property
            def __array_interface__(self):
                d = dict(self.data.__array_interface__)
                d["shape"] = (Dim(self.target),)
                return d

        a = DLPackArray.__new__(DLPackArray)
        try:
            a.__init__(Src(a))
        except ValueError:
            pass
        else:
            raise AssertionError("a negative extent was accepted")
        assert log == [RUNNING, NOT_YET_READ], log
        reinit(a)  # and after the failure
        assert log[2:] == [AFTER_FAILURE, FAILED_READ], log
        assert_failed(a)
    """,
    "self_as_source": """
        a = DLPackArray.__new__(DLPackArray)
        try:
            a.__init__(a)
        except ValueError as e:
            assert NOT_YET in str(e), e
        else:
            raise AssertionError("an array was imported from itself")
        assert_failed(a)
    """,
}


@pytest.mark.parametrize("case", sorted(REENTRANT))
def test_source_code_cannot_reinitialise_the_array(case):
    code = PRELUDE + textwrap.dedent(REENTRANT[case]) + "\nprint('checked')\n"
    proc = run_python(code)
    assert_clean_exit(proc)
    assert "checked" in proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr
