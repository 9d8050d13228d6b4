"""The Arrow export's shared record and capsule structs on the hot path.

The export record's memory is recycled through one atomic slot (released on
any thread, taken by the next export), the capsule structs are malloc'ed and
freed, and a zero-copy export trusts the view its DLPackArray validated when
it was made (only the copy path validates again).  These tests pin what that
could break: a recycled record keeping a previous export's layout, metadata or
copy; a keepalive dropped twice or never when releases race on several
threads; and the values of layouts at the edge of what validation accepts.
The tensor metadata is remembered per thread for the last cell layout: a
layout must never get another's, and a schema must keep its own after the memo
moves on.
"""

from __future__ import annotations

import ctypes

import numpy as np
from arrow_ctypes import (
    ArrowArray,
    ArrowArrayStream,
    ArrowDeviceArray,
    ArrowDeviceArrayStream,
    ArrowSchema,
    metadata_dict,
    struct_of,
)
from conftest import assert_clean_exit, require, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray

pa = require("pyarrow", "the reference Arrow implementation")


# Run in a fresh interpreter (a record that kept a previous export's fields
# could crash it).  Each case fills different fields of the record: tensor
# metadata (a heap string), a permutation, a bool8 leaf, a dense copy (the
# block), list levels on request.  The expected results are the first export
# of each case, all kept alive, so each got memory never used before.
RECYCLE_SCRIPT = """
import random
import numpy as np, pyarrow as pa
from dlpackarray import DLPackArray

CASES = {
    "float32": lambda: np.arange(7, dtype=np.float32),
    "tensor": lambda: np.arange(24, dtype=np.int32).reshape(2, 3, 4),
    "permuted": lambda: np.arange(24.0).reshape(2, 3, 4).transpose(0, 2, 1),
    "bool8": lambda: np.array([True, False, True]),
    "strided copy": lambda: np.arange(20, dtype=np.int64)[::3],
    "broadcast copy": lambda: np.broadcast_to(np.arange(3, dtype=np.uint8), (4, 3)),
    "empty": lambda: np.zeros((0, 5), dtype=np.float16)[:, ::2],
    "zero-d": lambda: np.array(2.5),
    "nested lists": None,
}
nested_type = pa.list_(pa.list_(pa.float32(), 4), 3)


def export(name):
    if name == "nested lists":
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        return pa.array(DLPackArray(x), type=nested_type)
    return pa.array(DLPackArray(CASES[name]()))


def seen(out):
    return str(out.type), out.to_pylist()


first = {name: export(name) for name in CASES}
expected = {name: seen(out) for name, out in first.items()}
rng = random.Random(23)
kept = []
for step in range(600):
    name = rng.choice(sorted(CASES))
    out = export(name)
    assert seen(out) == expected[name], (step, name)
    if rng.random() < 0.3:
        kept.append((name, out))  # the next export takes fresh memory
    del out  # otherwise its record's memory is parked for the next one
    if len(kept) > 5:
        kept.pop(rng.randrange(len(kept)))
for name, out in kept + list(first.items()):
    assert seen(out) == expected[name], name
print("ok")
"""


def test_recycled_export_records_keep_nothing_of_the_previous_export():
    proc = run_python(RECYCLE_SCRIPT)
    assert_clean_exit(proc)
    assert proc.stdout.strip() == "ok"


def test_schema_metadata_of_a_plain_column_after_a_tensor_export():
    # The exact fields a recycled record could leak: a tensor's extension
    # metadata and a bool8 leaf, then plain columns through the raw capsules.
    for _ in range(3):
        schema, array = DLPackArray(np.arange(24).reshape(2, 3, 4)).__arrow_c_device_array__()
        assert metadata_dict(struct_of(schema, ArrowSchema))
        del schema, array
        schema, array = DLPackArray(np.array([True])).__arrow_c_array__()
        del schema, array
        schema, array = DLPackArray(np.arange(3.0)).__arrow_c_device_array__()
        s = struct_of(schema, ArrowSchema)
        assert s.format == b"g"
        assert s.n_children == 0
        assert metadata_dict(s) == {}
        del schema, array


RACE_SCRIPT = """
import ctypes, gc, sys, threading, weakref
import numpy as np, pyarrow as pa
from arrow_ctypes import RELEASE_ARRAY, move_array
from dlpackarray import DLPackArray


class Source:
    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


src = Source(np.arange(64, dtype=np.float32))
ref = weakref.ref(src)
d = DLPackArray(src)
del src
base = sys.getrefcount(d)
for _ in range(30):
    moved = []
    for _ in range(8):
        _, array = d.__arrow_c_device_array__()
        # An ArrowDeviceArray starts with its ArrowArray: move_array moves
        # that out (the capsule's destructor then leaves it alone).
        moved.append(move_array(array))
        del array
    # ctypes drops the GIL around each release: the threads return record
    # memory to the slot while this thread takes it for new exports.
    threads = [threading.Thread(target=RELEASE_ARRAY(m.release), args=(ctypes.byref(m),))
               for m in moved]
    for t in threads:
        t.start()
    extra = [pa.array(d) for _ in range(4)]
    for t in threads:
        t.join()
    assert all(m.release is None for m in moved)  # each marked released
    assert all(e.to_numpy()[63] == 63.0 for e in extra)
    del extra, moved, threads
gc.collect()
assert sys.getrefcount(d) == base, (sys.getrefcount(d), base)  # each keepalive dropped once
del d
gc.collect()
assert ref() is None
print("ok")
"""


def test_keepalive_released_exactly_once_when_releases_race_on_threads():
    proc = run_python(RACE_SCRIPT)
    assert_clean_exit(proc)
    assert proc.stdout.strip() == "ok"


@st.composite
def edge_layouts(draw):
    """Layouts at the edge of what validation accepts: zero strides
    (broadcast), size 0 with any strides, negative strides, views at an
    offset into their buffer."""
    dtype = draw(st.sampled_from(["int8", "uint16", "float32", "int64", "float64"]))
    shape = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    base = np.arange(int(np.prod([max(n, 1) for n in shape])) * 3 + 5).astype(dtype)
    start = draw(st.integers(0, 4))
    kind = draw(st.sampled_from(["broadcast", "sliced", "reversed", "offset"]))
    if kind == "broadcast":
        row = base[start : start + shape[-1]]
        return np.broadcast_to(row, tuple(shape))
    n = int(np.prod(shape))
    view = base[start : start + n].reshape(shape)
    if kind == "sliced":
        return view[tuple(slice(None, None, 2) for _ in shape)]
    if kind == "reversed":
        return view[::-1]
    return view


@settings(max_examples=150, deadline=None)
@given(edge_layouts(), st.sampled_from([None, True]))
def test_edge_layouts_export_their_exact_values(x, copy):
    d = DLPackArray(x)
    schema, array = d.__arrow_c_device_array__(copy=copy)
    out = pa.Array._import_from_c_device_capsule(schema, array)
    if x.ndim == 1:
        assert out.to_numpy(zero_copy_only=False).tolist() == x.tolist()
        if x.size and copy is None:
            # Zero-copy exactly when NumPy calls the column C-contiguous.
            shared = out.buffers()[1].address == x.ctypes.data
            assert shared == x.flags.c_contiguous == (x.size == 1 or x.strides[0] == x.itemsize)
    else:
        storage = out.storage if isinstance(out.type, pa.BaseExtensionType) else out
        got = np.asarray(storage.flatten().to_numpy(zero_copy_only=False))
        assert len(out) == x.shape[0]
        assert got.tobytes() == np.ascontiguousarray(x).tobytes()


def test_every_field_of_every_capsule_struct_is_written():
    # The capsule structs are malloc'ed with only their release cleared: the
    # export must write every other field itself.  Their memory is made dirty
    # first (where the C library reuses freed blocks), then every field is
    # read back.
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    structs = (ArrowSchema, ArrowArray, ArrowDeviceArray, ArrowArrayStream, ArrowDeviceArrayStream)
    d1 = DLPackArray(np.arange(5, dtype=np.float32))
    d3 = DLPackArray(np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    for _ in range(20):
        for struct in structs:
            block = libc.malloc(ctypes.sizeof(struct))
            ctypes.memset(block, 0xAB, ctypes.sizeof(struct))
            libc.free(block)
        for d, rows, fmt in ((d1, 5, b"f"), (d3, 2, b"+w:12")):
            schema, array = d.__arrow_c_device_array__()
            s = struct_of(schema, ArrowSchema)
            assert (s.format, s.name, s.flags) == (fmt, b"", 2)
            assert not s.dictionary
            assert s.n_children == (0 if fmt == b"f" else 1)
            assert bool(s.children) == (s.n_children == 1)
            assert bool(s.metadata) == (s.n_children == 1)
            assert s.private_data is None or s.n_children == 1
            dev = struct_of(array, ArrowDeviceArray)
            assert (dev.device_type, dev.device_id, dev.sync_event) == (1, -1, None)
            assert list(dev.reserved) == [0, 0, 0]
            a = dev.array
            assert (a.length, a.null_count, a.offset) == (rows, 0, 0)
            assert not a.dictionary
            assert (a.n_buffers, a.n_children) == ((2, 0) if fmt == b"f" else (1, 1))
            assert bool(a.children) == (a.n_children == 1)
            assert a.private_data and a.release and a.buffers
            _, plain = d.__arrow_c_array__()
            p = struct_of(plain, ArrowArray)
            assert (p.length, p.null_count, p.offset) == (rows, 0, 0)
            assert not p.dictionary
            assert p.private_data and p.release and p.buffers
            del schema, array, plain
            for name, struct in (
                ("__arrow_c_stream__", ArrowArrayStream),
                ("__arrow_c_device_stream__", ArrowDeviceArrayStream),
            ):
                capsule = getattr(d, name)()
                st_ = struct_of(capsule, struct)  # valid while the capsule lives
                assert st_.get_schema and st_.get_next and st_.get_last_error
                assert st_.release and st_.private_data
                if struct is ArrowDeviceArrayStream:
                    assert st_.device_type == 1
                del st_, capsule


def _tensor_meta(x):
    """(shape, permutation) of the fixed_shape_tensor metadata x exports as
    zero-copy (copy=False keeps permuted cells in memory order), from pyarrow's
    own parse of the schema capsule."""
    schema, _ = DLPackArray(x).__arrow_c_array__(copy=False)
    t = pa.DataType._import_from_c_capsule(schema)
    return tuple(t.shape), tuple(t.permutation or range(len(t.shape)))


def _logical_meta(x):
    """(shape, permutation) of what __arrow_c_schema__ describes: the default
    export, whose cells are in logical order."""
    t = pa.DataType._import_from_c_capsule(DLPackArray(x).__arrow_c_schema__())
    return tuple(t.shape), tuple(t.permutation or range(len(t.shape)))


def _expected_meta(x):
    # Cells in physical order (largest stride first), permutation naming it.
    cell_strides = x.strides[1:]
    order = sorted(range(len(cell_strides)), key=lambda i: -cell_strides[i])
    perm = [0] * len(order)
    for k, i in enumerate(order):
        perm[i] = k
    return tuple(x.shape[1 + i] for i in order), tuple(perm)


def _layouts():
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    return [
        np.zeros((4, 3, 2), np.int16),
        np.zeros((4, 2, 3), np.int16),
        np.zeros((5, 6), np.int16),
        base,
        base.transpose(0, 2, 1, 3),
        base.transpose(0, 3, 2, 1),
        np.zeros((3, 3, 2), np.int16),
    ]


def test_tensor_metadata_is_exact_for_every_layout_in_any_order():
    # Each thread remembers its last cell layout's metadata: a layout after
    # another (same rank, same cells in another order, another rank) must never
    # get the previous one's.
    layouts = _layouts()
    rng = np.random.default_rng(5)
    for i in rng.integers(0, len(layouts), 300):
        x = layouts[i]
        assert _tensor_meta(x) == _expected_meta(x), (x.shape, x.strides)
        assert _logical_meta(x) == (x.shape[1:], tuple(range(x.ndim - 1)))
        if x.ndim > 2:
            # pyarrow reading the data with that metadata gets x back.
            assert np.array_equal(pa.array(DLPackArray(x)).to_numpy_ndarray(), x)


def test_tensor_metadata_outlives_the_next_layout_and_threads_keep_their_own():
    import threading

    layouts = _layouts()
    # Schemas kept while later exports replace the remembered layout: each keeps
    # the blob it was built with (shared, never rewritten or freed early).
    held = [(x, DLPackArray(x).__arrow_c_array__(copy=False)[0]) for x in layouts * 3]
    for x, capsule in held:
        t = pa.DataType._import_from_c_capsule(capsule)
        assert (tuple(t.shape), tuple(t.permutation or range(len(t.shape)))) == _expected_meta(x)
    errors = []

    def run(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in rng.integers(0, len(layouts), 200):
                x = layouts[i]
                got = _tensor_meta(x)
                if got != _expected_meta(x):
                    errors.append((seed, x.shape, got))
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append((seed, repr(e)))

    threads = [threading.Thread(target=run, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
