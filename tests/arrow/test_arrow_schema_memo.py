"""The Arrow schema memo (cpp/src/arrow_schema_memo.cpp): each thread remembers
its last successfully parsed schema by content, so the memo must never hand a
schema another type's answer, nor let a refusal through.

The oracle is a fresh thread, whose memo is empty: every import here is
compared with the same import made first thing in a new thread, and with what
pyarrow itself reads.  The types are chosen to collide where a careless key
would: one storage (``+w:64`` over float32) under different shapes,
permutations and dimension names, one schema struct rewritten in place, and
forged chains that differ from a good one in a single field the parse reads.
"""

from __future__ import annotations

import functools
import random
import threading

import numpy as np
import pytest
from arrow_forge import Forge, extension, metadata_blob, producer
from conftest import require
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray


class _Pyarrow:
    """pyarrow, imported by the first test that touches it: the forged
    schemas below test the same memo without it."""

    def __getattr__(self, name):
        return getattr(require("pyarrow", "builds the pool of real Arrow arrays"), name)


pa = _Pyarrow()

# Forges whose structs an imported array may still hold.
_KEEP: list = []


def outcome(make):
    """What importing ``make()`` gives: the array's shape, dtype, strides and
    bytes, or the exception's type and message."""
    try:
        x = np.asarray(DLPackArray(make()))
    except Exception as exc:  # every refusal is part of the outcome
        return (type(exc).__name__, str(exc))
    return ("ok", x.shape, x.dtype.str, x.strides, x.tobytes())


def in_fresh_thread(make):
    """outcome(make) on a new thread: the parse with nothing remembered."""
    box = []
    t = threading.Thread(target=lambda: box.append(outcome(make)))
    t.start()
    t.join()
    return box[0]


def _tensor_type(value_type, shape, permutation=None, dim_names=None):
    return pa.fixed_shape_tensor(value_type, shape, permutation=permutation, dim_names=dim_names)


def _tensor(value_type, shape, permutation=None, dim_names=None, rows=2):
    t = _tensor_type(value_type, shape, permutation, dim_names)
    k = int(np.prod(shape))
    storage = pa.FixedSizeListArray.from_arrays(
        pa.array(np.arange(rows * k) % 97, type=value_type), k
    )
    return pa.ExtensionArray.from_storage(t, storage)


# Arrays whose schemas differ in one thing a memo keyed on part of the schema
# would confuse: the first nine share the storage format "+w:64" over "f".
POOL_SIZE = 18


@functools.cache
def _pool() -> list:
    pool = _pool_arrays()
    assert len(pool) == POOL_SIZE
    return pool


def _pool_arrays() -> list:
    return [
        _tensor(pa.float32(), [8, 8]),
        _tensor(pa.float32(), [4, 16]),
        _tensor(pa.float32(), [64]),
        _tensor(pa.float32(), [2, 4, 8]),
        _tensor(pa.float32(), [8, 8], permutation=[1, 0]),
        _tensor(pa.float32(), [2, 4, 8], permutation=[2, 0, 1]),
        _tensor(pa.float32(), [2, 4, 8], permutation=[1, 2, 0]),
        _tensor(pa.float32(), [8, 8], dim_names=["y", "x"]),
        _tensor(pa.float32(), [16, 4]),
        _tensor(pa.float64(), [8, 8]),
        _tensor(pa.int32(), [8, 8]),
        _tensor(pa.uint8(), [8, 8], rows=3),
        pa.array(np.arange(64, dtype=np.float32)),
        pa.array(np.arange(64, dtype=np.int32)),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(128, dtype=np.float32)), 64),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(128, dtype=np.float32)), 8),
        pa.FixedSizeListArray.from_arrays(
            pa.FixedSizeListArray.from_arrays(pa.array(np.arange(128, dtype=np.float32)), 8), 8
        ),
        pa.ExtensionArray.from_storage(pa.bool8(), pa.array([0, 1, 1, 0], type=pa.int8())),
    ]


def _reference(arr) -> np.ndarray:
    if isinstance(arr.type, pa.FixedShapeTensorType):
        # The spec's reading, not to_numpy_ndarray(): pyarrow misreads
        # permutations that are not their own inverse (docs/limitations.md).
        t = arr.type
        perm = t.permutation or list(range(len(t.shape)))
        cells = arr.storage.flatten().to_numpy(zero_copy_only=True)
        return cells.reshape([len(arr), *t.shape]).transpose([0, *(p + 1 for p in perm)])
    if isinstance(arr.type, pa.FixedSizeListType):
        return _flat_lists(arr)
    if arr.type == pa.bool8():
        return arr.to_numpy(zero_copy_only=False)
    return arr.to_numpy(zero_copy_only=True)


def _flat_lists(arr) -> np.ndarray:
    shape = [len(arr)]
    t = arr.type
    values = arr
    while isinstance(t, pa.FixedSizeListType):
        shape.append(t.list_size)
        values = values.flatten()
        t = t.value_type
    return values.to_numpy(zero_copy_only=True).reshape(shape)


def test_the_pool_really_collides():
    # The collisions this file relies on: nine schemas, one storage format.
    storage = pa.list_(pa.float32(), 64)
    assert all(a.type.storage_type == storage for a in _pool()[:9])
    params = {
        (tuple(t.shape), tuple(t.permutation or ()), tuple(t.dim_names or ()))
        for t in (a.type for a in _pool()[:9])
    }
    assert len(params) == 9


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, POOL_SIZE - 1), min_size=2, max_size=24))
def test_every_import_in_any_order_reads_its_own_type(order):
    for i in order:
        arr = _pool()[i]
        got = outcome(lambda arr=arr: arr)
        assert got[0] == "ok", got
        ref = _reference(arr)
        assert got[1:3] == (ref.shape, ref.dtype.str), (i, got[:4])
        assert got[4] == ref.tobytes(), i  # tobytes: C order, whatever the strides


def test_each_pool_entry_matches_a_fresh_thread_after_every_other():
    for i, arr in enumerate(_pool()):
        fresh = in_fresh_thread(lambda arr=arr: arr)
        for j, before in enumerate(_pool()):
            outcome(lambda before=before: before)  # the memo now holds `before`
            assert outcome(lambda arr=arr: arr) == fresh, (j, i)


# -- forged chains: one field away from a good tensor schema ---------------------------------

GOOD_META = extension(b"arrow.fixed_shape_tensor", b'{"shape":[2,3]}')
PERMUTED_META = extension(b"arrow.fixed_shape_tensor", b'{"shape":[2,3],"permutation":[1,0]}')


def _forged(top=None, child=None, rows=2):
    """A fixed_shape_tensor [2, 3] over float32, with fields of the top or
    child schema node replaced; the array is always the good one."""
    f = Forge()
    _KEEP.append(f)
    schema = [{"format": b"+w:6", "name": b"", "metadata": GOOD_META}, {"format": b"f"}]
    schema[0].update(top or {})
    schema[1].update(child or {})
    leaf = schema[1]["format"] if schema[1]["format"] in (b"f", b"i", b"g") else b"f"
    array = [{"format": b"+w:6"}, {"format": leaf}]
    return producer("__arrow_c_array__", f.pair(schema, array, rows))


VARIANTS = {
    "good": ({}, {}),
    "shape 3x2": ({"metadata": extension(b"arrow.fixed_shape_tensor", b'{"shape":[3,2]}')}, {}),
    "shape 6": ({"metadata": extension(b"arrow.fixed_shape_tensor", b'{"shape":[6]}')}, {}),
    "permuted": ({"metadata": PERMUTED_META}, {}),
    "shape that does not fit": (
        {"metadata": extension(b"arrow.fixed_shape_tensor", b'{"shape":[2,4]}')},
        {},
    ),
    "int32 values": ({}, {"format": b"i"}),
    "float64 values": ({}, {"format": b"g"}),
    "string values": ({}, {"format": b"u"}),
    "top name NULL": ({"name": None}, {}),
    "top name not UTF-8": ({"name": b"t\xff"}, {}),
    "child name not UTF-8": ({}, {"name": b"item\xc3"}),
    "child name changed": ({}, {"name": b"values"}),
    "format not UTF-8": ({"format": b"+w:6\xff"}, {}),
    "list size 5": ({"format": b"+w:5"}, {}),
    "top dictionary": ({"dictionary": True}, {}),
    "child dictionary": ({}, {"dictionary": True}),
    "child released": ({}, {"release": False}),
    "two children": ({"n_children": 2}, {}),
    "no children": ({"n_children": 0}, {}),
    "NULL child": ({"child": "null"}, {}),
    "extra metadata entry": (
        {
            "metadata": metadata_blob(
                [
                    (b"ARROW:extension:name", b"arrow.fixed_shape_tensor"),
                    (b"ARROW:extension:metadata", b'{"shape":[2,3]}'),
                    (b"note", b"\xff\xfe"),
                ]
            )
        },
        {},
    ),
    "negative metadata count": ({"metadata": b"\xff\xff\xff\xff"}, {}),
    "unknown extension": ({"metadata": extension(b"my.tensor", b'{"shape":[2,3]}')}, {}),
    "bool8 on a list": ({"metadata": extension(b"arrow.bool8")}, {}),
    "child bool8 on float": ({}, {"metadata": extension(b"arrow.bool8")}),
    "no metadata": ({"metadata": None}, {}),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_variant_after_the_good_schema_is_read_as_if_first(name):
    top, child = VARIANTS[name]
    fresh = in_fresh_thread(lambda: _forged(top, child))
    outcome(lambda: _forged())  # remembered: the good schema
    assert outcome(lambda: _forged(top, child)) == fresh
    # ...and the good one right after the variant, as if first.
    assert outcome(lambda: _forged()) == in_fresh_thread(lambda: _forged())


def test_variants_refuse_or_differ_as_expected():
    # The oracle above would pass a memo-free import that refuses everything:
    # pin what the variants mean.
    good = outcome(lambda: _forged())
    assert good[:3] == ("ok", (2, 2, 3), "<f4")
    assert outcome(lambda: _forged(*VARIANTS["shape 3x2"]))[:3] == ("ok", (2, 3, 2), "<f4")
    assert outcome(lambda: _forged(*VARIANTS["int32 values"]))[:3] == ("ok", (2, 2, 3), "<i4")
    assert outcome(lambda: _forged(*VARIANTS["child name changed"]))[:3] == good[:3]
    kind, message = outcome(lambda: _forged(*VARIANTS["child name not UTF-8"]))
    assert kind == "ValueError" and "not valid UTF-8" in message
    kind, message = outcome(lambda: _forged(*VARIANTS["top dictionary"]))
    assert kind == "TypeError" and "dictionary" in message
    kind, message = outcome(lambda: _forged(*VARIANTS["child released"]))
    assert kind == "ValueError" and "released" in message


def test_one_struct_rewritten_in_place_is_read_by_its_new_content():
    # A producer may hand out one ArrowSchema address for different types:
    # the memo compares content, never the address.
    f = Forge()
    _KEEP.append(f)
    schema = f.schema([{"format": b"+w:6", "name": b"", "metadata": GOOD_META}, {"format": b"f"}])
    shapes = []
    for meta in (GOOD_META, extension(b"arrow.fixed_shape_tensor", b'{"shape":[3,2]}'), GOOD_META):
        f.schema([{"format": b"+w:6", "name": b"", "metadata": meta}, {"format": b"f"}], out=schema)
        pair = (
            f.capsule(schema, b"arrow_schema"),
            f.capsule(f.array([{"format": b"+w:6"}, {"format": b"f"}], 2), b"arrow_array"),
        )
        shapes.append(np.asarray(DLPackArray(producer("__arrow_c_array__", pair))).shape)
    assert shapes == [(2, 2, 3), (2, 3, 2), (2, 2, 3)]


def test_threads_interleaving_types_each_read_their_own():
    # One memo per thread: six threads, each alternating two types of the
    # pool (different per thread), started together.
    _pool()  # built here: a skip raised on a worker thread would be lost
    errors = []
    barrier = threading.Barrier(6)

    def work(seed):
        rng = random.Random(seed)
        mine = rng.sample(range(POOL_SIZE), 2)
        refs = {i: _reference(_pool()[i]) for i in mine}
        barrier.wait()
        for _ in range(300):
            i = rng.choice(mine)
            got = np.asarray(DLPackArray(_pool()[i]))
            if got.shape != refs[i].shape or not np.array_equal(got, refs[i]):
                errors.append((seed, i, got.shape))
                return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
