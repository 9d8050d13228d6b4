"""The DLPack 1.3 C exchange API, both ways.

Provider: ``DLPackArray.__dlpack_c_exchange_api__`` is taken by apache-tvm-ffi (``from_dlpack``
and function arguments) without a Python-level ``__dlpack__`` call, and each of its functions
behaves as the spec says.  Consumer: ``DLPackArray(obj)`` / ``from_dlpack(obj)`` use the tables
of torch, tvm-ffi and any other type, with the same results and copy/device rules as the
``__dlpack__`` path, and fall back to that path for device data and producer refusals.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys

import numpy as np
import pytest
from conftest import assert_clean_exit, require, run_python
from dlpack_ctypes import (
    KDL_CPU,
    KDL_CUDA,
    KDL_FLOAT,
    DLDataType,
    DLDevice,
    DLManagedTensorVersioned,
    DLTensor,
    Producer,
)
from exchange_ctypes import SET_ERROR, CallbackProvider, Functions, call_deleter, table

import dlpackarray
from dlpackarray import DLPackArray, from_dlpack

OURS = Functions(DLPackArray.__dlpack_c_exchange_api__)


class CountingArray(DLPackArray):
    """A DLPackArray whose Python-level __dlpack__ counts its calls."""

    calls = 0

    def __dlpack__(self, **kwargs):
        type(self).calls += 1
        return super().__dlpack__(**kwargs)


# -- provider: the table itself -----------------------------------------------------------------


def test_table_is_a_static_dlpack_1_3_table():
    capsule = DLPackArray.__dlpack_c_exchange_api__
    assert "dlpack_exchange_api" in repr(capsule)
    t = table(capsule)
    assert (t.version.major, t.version.minor) == dlpackarray.DLPACK_VERSION == (1, 3)
    assert t.prev_api is None
    for name, _ in t._fields_[2:]:
        assert getattr(t, name), f"{name} is NULL"
    # One table for the life of the process, inherited by subclasses.
    assert CountingArray.__dlpack_c_exchange_api__ is capsule
    assert (
        table(capsule).managed_tensor_from_py_object_no_sync
        == t.managed_tensor_from_py_object_no_sync
    )


def test_managed_tensor_from_py_object_shares_memory_and_keeps_it_alive():
    x = np.arange(6.0).reshape(2, 3)[:, ::2]
    rc = sys.getrefcount(x)
    address = OURS.managed(DLPackArray(x))
    m = DLManagedTensorVersioned.from_address(address)
    t = m.dl_tensor
    assert (m.version.major, m.version.minor) == (1, 3) and m.flags == 0
    assert t.data + t.byte_offset == x.ctypes.data
    assert [t.shape[i] for i in range(2)] == [2, 2] and [t.strides[i] for i in range(2)] == [3, 2]
    gc.collect()
    assert sys.getrefcount(x) == rc + 1  # the managed tensor keeps the memory alive
    call_deleter(address)
    assert sys.getrefcount(x) == rc


def test_managed_tensor_from_py_object_flags_read_only_and_wraps_other_objects():
    address = OURS.managed(b"abcd")  # not a DLPackArray: imported as DLPackArray(obj)
    m = DLManagedTensorVersioned.from_address(address)
    assert m.flags & 1 and m.dl_tensor.shape[0] == 4
    call_deleter(address)
    with pytest.raises(TypeError, match="cannot wrap"):
        OURS.managed(object())


def test_managed_tensor_to_py_object_adopts_the_tensor():
    p = Producer(np.arange(4, dtype=np.float32))
    a = OURS.to_py(p.address)
    assert type(a) is DLPackArray and a.data_ptr == p.struct.dl_tensor.data
    assert np.from_dlpack(a).tolist() == [0, 1, 2, 3]
    assert p.deleter_calls == 0
    del a
    gc.collect()
    assert p.deleter_calls == 1
    bad = Producer(np.arange(2.0), version=(2, 0))
    with pytest.raises(BufferError, match="version 2.0"):
        OURS.to_py(bad.address)
    assert bad.deleter_calls == 1  # refused and deleted at once


def test_dltensor_from_py_object_borrows():
    a = DLPackArray(np.arange(12, dtype=np.int16).reshape(3, 4)).T
    t = DLTensor()
    assert OURS.dltensor_from_py(a, ctypes.byref(t)) == 0
    assert t.data == a.data_ptr and t.ndim == 2 and (t.dtype.code, t.dtype.bits) == (0, 16)
    assert [t.shape[i] for i in range(2)] == [4, 3] and [t.strides[i] for i in range(2)] == [1, 4]
    with pytest.raises(BufferError, match="read-only"):
        OURS.dltensor_from_py(DLPackArray(b"ro"), ctypes.byref(t))
    with pytest.raises(TypeError, match="expected a dlpackarray.DLPackArray"):
        OURS.dltensor_from_py(np.zeros(2), ctypes.byref(t))


def test_allocator_returns_a_cpu_buffer_owned_by_a_dlpackarray():
    shape = (ctypes.c_int64 * 2)(3, 5)
    proto = DLTensor(None, DLDevice(KDL_CPU, 0), 2, DLDataType(KDL_FLOAT, 32, 1), shape, None, 0)
    out = ctypes.c_void_p()
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind, msg)))
    assert OURS.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == 0
    assert not errors
    m = DLManagedTensorVersioned.from_address(out.value)
    t = m.dl_tensor
    assert t.data % 64 == 0 and (t.device.device_type, t.dtype.bits) == (KDL_CPU, 32)
    assert [t.shape[i] for i in range(2)] == [3, 5] and [t.strides[i] for i in range(2)] == [5, 1]
    ctypes.memset(t.data, 0, 60)  # all 15 float32 are writable
    a = OURS.to_py(out.value)  # our own consumer takes the tensor back
    assert np.from_dlpack(a).sum() == 0 and a.shape == (3, 5)
    proto.device = DLDevice(KDL_CUDA, 0)
    assert OURS.allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error) == -1
    assert errors and errors[0][0] == b"BufferError" and b"host memory" in errors[0][1]


def test_current_work_stream_is_null():
    stream = ctypes.c_void_p(12345)
    assert OURS.current_work_stream(KDL_CPU, 0, ctypes.byref(stream)) == 0
    assert stream.value is None


# -- provider: NULL arguments ---------------------------------------------------------------------

# Each call runs in its own interpreter (a regression would be a segfault).  `setup` makes
# `f` (RawFunctions of our table), `a` (an array of a NumPy array `x`) and `errors` (what
# SetError received); `call` is the expression whose outcome is printed.
NULL_CALL_CHILD = """
import ctypes, gc, json, sys, weakref
import numpy as np
from dlpackarray import DLPackArray
from exchange_ctypes import SET_ERROR, Functions, RawFunctions
from dlpack_ctypes import DLTensor, DLDevice, DLDataType, KDL_CPU, KDL_FLOAT
f = RawFunctions(DLPackArray.__dlpack_c_exchange_api__)
x = np.arange(4.0)
a = DLPackArray(x)
alive = weakref.ref(x)
out = ctypes.c_void_p()
t = DLTensor()
errors = []
set_error = SET_ERROR(lambda ctx, kind, msg: errors.append([kind.decode(), msg.decode()]))
shape = (ctypes.c_int64 * 1)(4)
proto = DLTensor(None, DLDevice(KDL_CPU, 0), 1, DLDataType(KDL_FLOAT, 64, 1), shape, None, 0)
try:
    result = {"rc": CALL, "raised": None}
except Exception as e:
    result = {"rc": None, "raised": [type(e).__name__, str(e)]}
result["errors"] = errors
del a, x
gc.collect()
result["leaked"] = alive() is not None  # a tensor of a's memory never deleted
print(json.dumps(result))
"""

# call -> (rc, raised, SetError reports); nothing may be leaked.
NULL_CALLS = {
    "f.allocator(ctypes.byref(proto), None, None, set_error)": (
        -1,
        None,
        [["SystemError", "managed_tensor_allocator: out is NULL"]],
    ),
    "f.allocator(ctypes.byref(proto), ctypes.byref(out), None, None)": (
        None,
        ["SystemError", "managed_tensor_allocator: SetError is NULL"],
        [],
    ),
    "f.from_py(None, ctypes.byref(out))": (
        None,
        ["SystemError", "managed_tensor_from_py_object_no_sync: py_object is NULL"],
        [],
    ),
    "f.from_py(id(a), None)": (
        None,
        ["SystemError", "managed_tensor_from_py_object_no_sync: out is NULL"],
        [],
    ),
    "f.to_py(None, ctypes.byref(out))": (
        None,
        ["ValueError", "NULL DLManagedTensorVersioned pointer"],
        [],
    ),
    # The tensor is handed over (stolen): refused, and deleted rather than leaked.
    "f.to_py(Functions(DLPackArray.__dlpack_c_exchange_api__).managed(a), None)": (
        None,
        ["SystemError", "managed_tensor_to_py_object_no_sync: out_py_object is NULL"],
        [],
    ),
    "f.dltensor_from_py(None, ctypes.byref(t))": (
        None,
        ["SystemError", "dltensor_from_py_object_no_sync: py_object is NULL"],
        [],
    ),
    "f.dltensor_from_py(id(a), None)": (
        None,
        ["SystemError", "dltensor_from_py_object_no_sync: out is NULL"],
        [],
    ),
    "f.current_work_stream(KDL_CPU, 0, None)": (
        None,
        ["SystemError", "current_work_stream: out_current_stream is NULL"],
        [],
    ),
}


@pytest.mark.parametrize("call", sorted(NULL_CALLS))
def test_table_functions_given_null_fail_cleanly(call):
    proc = run_python(NULL_CALL_CHILD.replace("CALL", call))
    assert_clean_exit(proc, call)
    rc, raised, errors = NULL_CALLS[call]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome == {"rc": rc, "raised": raised, "errors": errors, "leaked": False}


# -- provider: apache-tvm-ffi takes the table -----------------------------------------------------


@pytest.fixture
def tvm_ffi():
    return require("tvm_ffi", "apache-tvm-ffi consumes and provides DLPack exchange tables")


def test_tvm_ffi_from_dlpack_uses_the_table(tvm_ffi):
    x = np.arange(5, dtype=np.float64)
    rc = sys.getrefcount(x)
    CountingArray.calls = 0
    t = tvm_ffi.from_dlpack(CountingArray(x))
    assert CountingArray.calls == 0  # no Python-level __dlpack__
    assert t.data_ptr() == x.ctypes.data and tuple(t.shape) == (5,)
    x[0] = 7.0
    assert np.from_dlpack(t)[0] == 7.0
    del t
    gc.collect()
    assert sys.getrefcount(x) == rc  # the managed tensor was deleted exactly once


def test_tvm_ffi_function_arguments_use_the_table_both_ways(tvm_ffi):
    echo = tvm_ffi.get_global_func("testing.echo")
    x = np.arange(3, dtype=np.int32)
    CountingArray.calls = 0
    out = echo(CountingArray(x))
    assert CountingArray.calls == 0
    # The returned tensor came back through managed_tensor_to_py_object_no_sync.
    assert type(out) is DLPackArray and out.data_ptr == x.ctypes.data
    assert np.from_dlpack(out).tolist() == [0, 1, 2]


# -- consumer ------------------------------------------------------------------------------------


def _same_view(a, b):
    return (a.shape, a.strides, a.dtype, a.readonly, a.data_ptr + a.byte_offset, a.device) == (
        b.shape,
        b.strides,
        b.dtype,
        b.readonly,
        b.data_ptr + b.byte_offset,
        b.device,
    )


@pytest.fixture
def torch():
    torch = require("torch", "torch.Tensor publishes a DLPack exchange table")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__")
    return torch


def _counting_tensor(torch, t):
    class CountingTensor(torch.Tensor):
        calls = 0

        def __dlpack__(self, *args, **kwargs):
            type(self).calls += 1
            return super().__dlpack__(*args, **kwargs)

    return t.as_subclass(CountingTensor)


@pytest.mark.parametrize(
    "make",
    [
        lambda torch: torch.arange(12.0).reshape(3, 4),
        lambda torch: torch.arange(12, dtype=torch.int16).reshape(3, 4).T,
        lambda torch: torch.arange(20, dtype=torch.uint8)[2:17:3],
        lambda torch: torch.tensor(3.5, dtype=torch.bfloat16),
        lambda torch: torch.ones(2, 0, 3, dtype=torch.bool),
        lambda torch: torch.zeros(4, dtype=torch.complex64).expand(3, 4),
    ],
)
def test_torch_table_gives_the_python_path_result(torch, make):
    t = make(torch)
    ct = _counting_tensor(torch, t)
    for convert in (DLPackArray, from_dlpack):
        via_table = convert(ct)
        assert type(ct).calls == 0, "the Python-level __dlpack__ was called"
        via_python = DLPackArray(t.__dlpack__(max_version=(1, 3)))
        assert _same_view(via_table, via_python)
        assert via_table.data_ptr + via_table.byte_offset == t.data_ptr()


@pytest.mark.parametrize(
    "make",
    [
        lambda torch: torch.arange(4.0).requires_grad_(),
        lambda torch: torch.tensor([1 + 2j, 3 - 4j]).conj(),
    ],
    ids=["requires_grad", "conj_bit"],
)
def test_torch_state_the_table_cannot_carry_takes_dunder_dlpack(torch, make):
    # torch 2.13's table exports these as their stored bytes (the conjugation or
    # negation still pending: wrong values); its __dlpack__ refuses them.  We
    # must give the __dlpack__ answer, never the silent wrong values.
    t = make(torch)
    assert t.requires_grad or t.is_conj() or t.is_neg()
    with pytest.raises(Exception) as expected:
        t.__dlpack__(max_version=(1, 3))
    ct = _counting_tensor(torch, t)
    for convert in (DLPackArray, from_dlpack):
        with pytest.raises(type(expected.value)):
            convert(ct)
    assert type(ct).calls == 2, "the refusal must come from torch's __dlpack__"


def test_torch_pinned_tensor_takes_dunder_dlpack_where_cuda_is_initialised(torch, monkeypatch):
    # The real-GPU run found a pinned tensor read before its non-blocking copy
    # ended: the table labels pinned memory CPU and never synchronises.  Where
    # torch's CUDA state is initialised, a pinned tensor takes __dlpack__ (its
    # __dlpack_device__ says CUDA_HOST, which is waited for); elsewhere
    # is_pinned() is not even asked.  torch's CPU wheel cannot pin, so
    # is_pinned() is stubbed on a subclass.
    asked = []

    class Pinned(type(_counting_tensor(torch, torch.zeros(1)))):
        calls = 0

        def is_pinned(self, *args):
            asked.append(1)
            return True

    t = torch.arange(6.0).as_subclass(Pinned)
    monkeypatch.setattr(torch.cuda, "_initialized", False, raising=False)
    for convert in (DLPackArray, from_dlpack):
        assert convert(t).tolist() == list(range(6))
    assert Pinned.calls == 0 and asked == [], "no CUDA state: the table, no is_pinned()"
    monkeypatch.setattr(torch.cuda, "_initialized", True)
    for convert in (DLPackArray, from_dlpack):
        assert convert(t).tolist() == list(range(6))
    assert Pinned.calls == 2 and len(asked) >= 2, "pinned: torch's __dlpack__ path"


def test_torch_negative_bit_is_refused_not_exported_as_wrong_values(torch):
    # torch 2.13 exports a negated view's stored bytes through __dlpack__ and its
    # table alike (np.from_dlpack then shows the un-negated numbers).
    t = torch.tensor([1 + 2j, 3 - 4j]).conj().imag
    assert t.is_neg() and t.tolist() == [-2.0, 4.0]
    for convert in (DLPackArray, from_dlpack):
        with pytest.raises(BufferError, match="negative bit.*resolve_neg"):
            convert(t)
    assert DLPackArray(t.resolve_neg()).tolist() == [-2.0, 4.0]


def test_torch_table_tensor_is_released_exactly_once(torch):
    t = torch.arange(8.0)
    base = t._use_count()
    a = DLPackArray(_counting_tensor(torch, t))
    view = a[::2]
    assert t._use_count() == base + 1
    del a
    gc.collect()
    assert t._use_count() == base + 1  # the view still holds it
    del view
    gc.collect()
    assert t._use_count() == base


def test_consumer_copy_and_device_rules_on_the_table_path(torch):
    t = torch.arange(6, dtype=torch.int64)
    ct = _counting_tensor(torch, t)
    base = t._use_count()
    c = DLPackArray(ct, copy=True)
    assert c.data_ptr != t.data_ptr() and np.from_dlpack(c).tolist() == list(range(6))
    assert DLPackArray(ct, copy=False).data_ptr == t.data_ptr()
    assert DLPackArray(ct, device="cpu").data_ptr == t.data_ptr()
    gc.collect()
    assert t._use_count() == base
    # A refused request releases the producer's tensor at once: adopted by the
    # exchange consumer, released by the import's error path in another module.
    with pytest.raises(BufferError, match="copies between host memory"):
        DLPackArray(ct, device=(KDL_CUDA, 0))
    with pytest.raises(ValueError, match="copy=False"):
        from_dlpack(ct, device=(KDL_CUDA, 0), copy=False)
    assert t._use_count() == base
    assert type(ct).calls == 0


def test_tvm_ffi_table_consumed(tvm_ffi):
    from tvm_ffi.core import DLTensorTestWrapper

    class CountingWrapper(DLTensorTestWrapper):
        calls = 0

        def __dlpack__(self, **kwargs):
            type(self).calls += 1
            return super().__dlpack__(**kwargs)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    rc = sys.getrefcount(x)
    w = CountingWrapper(tvm_ffi.from_dlpack(x))
    a = DLPackArray(w)
    b = from_dlpack(w)
    assert CountingWrapper.calls == 0
    assert a.data_ptr == b.data_ptr == x.ctypes.data and a.shape == (2, 3) and not a.readonly
    assert _same_view(a, DLPackArray(w.__dlpack__(max_version=(1, 3))))
    del a, b, w
    gc.collect()
    assert sys.getrefcount(x) == rc


def test_our_consumer_against_our_provider_through_a_foreign_table():
    """A foreign type whose table delegates to ours: our consumer, our provider."""
    provider = CallbackProvider(lambda obj: OURS.managed(obj.inner))

    class Holder:
        __dlpack_c_exchange_api__ = provider.capsule

        def __init__(self, inner):
            self.inner = inner

    x = np.arange(10, dtype=np.uint16)
    rc = sys.getrefcount(x)
    a = DLPackArray(Holder(DLPackArray(x)[1::3]))
    b = from_dlpack(Holder(DLPackArray(b"read-only")))
    assert provider.calls == 2
    assert np.from_dlpack(a).tolist() == [1, 4, 7]
    assert a.data_ptr + a.byte_offset == x.ctypes.data + 2
    assert b.readonly and bytes(b) == b"read-only"
    del a
    gc.collect()
    assert sys.getrefcount(x) == rc


def test_legacy_int_attribute_is_understood():
    p = Producer(np.arange(3.0))
    provider = CallbackProvider(lambda obj: p.address, version=(1, 2))

    class Old:
        __c_dlpack_exchange_api__ = provider.address

    a = DLPackArray(Old())
    assert provider.calls == 1 and np.from_dlpack(a).tolist() == [0.0, 1.0, 2.0]
    del a
    gc.collect()
    assert p.deleter_calls == 1


def test_device_data_and_refusals_fall_back_to_dunder_dlpack():
    """The exchange functions do not synchronise; device data takes the
    __dlpack__ path (whose stream handshake makes the producer do it)."""
    on_device = Producer(
        None, shape=(4,), dtype=(KDL_FLOAT, 32, 1), data=0x1000, device=(KDL_CUDA, 0)
    )
    provider = CallbackProvider(lambda obj: on_device.address)
    host = np.arange(4, dtype=np.float32)

    class DeviceTensor:
        __dlpack_c_exchange_api__ = provider.capsule
        calls = 0

        def __dlpack__(self, **kwargs):
            DeviceTensor.calls += 1
            return DLPackArray(host).__dlpack__(**kwargs)

    a = DLPackArray(DeviceTensor())
    assert provider.calls == 1 and on_device.deleter_calls == 1  # released, not used
    assert DeviceTensor.calls == 1 and a.data_ptr == host.ctypes.data

    refusing = CallbackProvider(lambda obj: None)  # returns -1

    class Refusing(DeviceTensor):
        __dlpack_c_exchange_api__ = refusing.capsule

    DeviceTensor.calls = 0
    assert DLPackArray(Refusing()).data_ptr == host.ctypes.data
    assert refusing.calls == 1 and DeviceTensor.calls == 1


def test_per_type_cache_follows_class_changes():
    p1, p2 = Producer(np.arange(2.0)), Producer(np.arange(3.0))
    first = CallbackProvider(lambda obj: p1.address)
    second = CallbackProvider(lambda obj: p2.address)

    class Late:
        def __dlpack__(self, **kwargs):
            return DLPackArray(np.zeros(1)).__dlpack__(**kwargs)

    assert DLPackArray(Late()).shape == (1,)  # no table yet: the Python path
    Late.__dlpack_c_exchange_api__ = first.capsule
    assert DLPackArray(Late()).shape == (2,) and first.calls == 1
    Late.__dlpack_c_exchange_api__ = second.capsule
    assert DLPackArray(Late()).shape == (3,) and second.calls == 1
    del Late.__dlpack_c_exchange_api__
    assert DLPackArray(Late()).shape == (1,)
    gc.collect()
    assert p1.deleter_calls == p2.deleter_calls == 1


def test_tables_with_another_major_version_are_ignored():
    p = Producer(np.arange(2.0))
    provider = CallbackProvider(lambda obj: p.address, version=(2, 0))

    class Future:
        __dlpack_c_exchange_api__ = provider.capsule

        def __dlpack__(self, **kwargs):
            return DLPackArray(np.zeros(5)).__dlpack__(**kwargs)

    assert DLPackArray(Future()).shape == (5,) and provider.calls == 0


def test_byte_offset_is_folded_alike_by_capsule_and_exchange_imports():
    # One home for reading a consumed managed tensor (view_from_managed): a
    # nonzero byte_offset reaches data the same way through a capsule (versioned
    # or legacy) and through the exchange table (whose import kept it unfolded
    # before).
    x = np.arange(8.0)

    def producer(versioned=True):
        return Producer(
            x, shape=(3,), strides=(2,), byte_offset=16, versioned=versioned, data=x.ctypes.data
        )

    p_table = producer()
    provider = CallbackProvider(lambda obj: p_table.address)

    class Tabled:
        __dlpack_c_exchange_api__ = provider.capsule

    views = [
        DLPackArray(Tabled()),
        DLPackArray(producer().capsule()),
        DLPackArray(producer(versioned=False).capsule()),
    ]
    for a in views:
        assert (a.data_ptr, a.byte_offset) == (x.ctypes.data + 16, 0)
        assert np.asarray(a).tolist() == [2.0, 4.0, 6.0]
    assert provider.calls == 1
    del views
    gc.collect()
    assert p_table.deleter_calls == 1
