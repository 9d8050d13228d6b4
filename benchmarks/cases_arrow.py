"""B9: the Arrow bridge, each route against its floor.

Export: ``pa.array(d)``, ``pl.Series(d)``, ``pl.from_arrow(d)`` and a DuckDB
query over a float32 DLPackArray of 1 KB ... 1 GB; zero-copy, so the time
should be flat in size.  Import: ``DLPackArray(pa_array)``,
``np.asarray(DLPackArray(pa_array))`` and ``torch.from_dlpack`` of it against
pyarrow's own NumPy route, and an N-D ``FixedShapeTensorArray`` into NumPy
against ``to_numpy_ndarray()``.

Every case names its floor (``Case.floor``): the least any implementation can
cost on that route.  Export floors are a minimal producer compiled at setup
(``benchmarks/capi/b9_floor_*.c``: two malloc'ed structs in two capsules, a
reference kept, nothing else) read by the same consumer; import floors are a
minimal C consumer of the same producer (move the struct out, read the data
pointer), or the consumer reading the producer's own capsule directly.  The
consumer's part (pyarrow's, polars' import) is in the floor, so ``ours /
floor`` is what our own code adds.  The DLPack import routes' floor is
``b9_floor.DLPackBufferWrap``: one ``__dlpack__`` call from C, the capsule
kept, the buffer protocol answered from the DLTensor; ``np.asarray`` reads a
wrapper through the buffer protocol first, so ``np.asarray(DLPackBufferWrap(
pa_array))`` is the floor of ``np.asarray(DLPackArray(pa_array))``.
``np.from_dlpack(pa_array)`` (no wrapper: NumPy's own DLPack import, another
route) stays as a reference row.  The Arrow-capsule import has a second, lower
floor: ``b9_floor.ArrowSpecWrap`` makes the checks the C data interface leaves
to a consumer of a primitive column and keeps the moved struct in the wrapper
itself, with no separate owner object.
"""

from __future__ import annotations

import pathlib

from benchmarks.harness import Case, Contender, Target

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
SIZES = (KB, MB, 64 * MB, GB)
_CAPI_DIR = pathlib.Path(__file__).parent / "capi"
# The floor module's C files (b9_floor.h: what they share), in a fixed build order.
FLOOR_SOURCES = tuple(
    _CAPI_DIR / name
    for name in (
        "b9_floor_module.c",
        "b9_floor_arrow_producer.c",
        "b9_floor_arrow_consumer.c",
        "b9_floor_dlpack.c",
    )
)
_floor_module: list = []  # built once per process


def _label(nbytes: int) -> str:
    for unit, name in ((GB, "GB"), (MB, "MB"), (KB, "KB")):
        if nbytes >= unit:
            return f"{nbytes // unit}{name}"
    return f"{nbytes}B"


def floor_module():
    """The B9 floor extension (``FLOOR_SOURCES``), compiled on first use."""
    if not _floor_module:
        import dlpackarray
        from benchmarks.cases_capi import _compile

        # The DLPack declarations come from the package's own header.
        _floor_module.append(_compile("b9_floor", FLOOR_SOURCES, [dlpackarray.get_include()], []))
    return _floor_module[0]


class ArrowOnly:
    """Exposes only ``__arrow_c_array__``: forces DLPackArray's Arrow import."""

    def __init__(self, src):
        self.src = src

    def __arrow_c_array__(self, requested_schema=None):
        return self.src.__arrow_c_array__(requested_schema)


class PyArrowCapsules:
    """Hands out pyarrow's own capsules (``pa_array.__arrow_c_array__()``): the
    round trip pyarrow makes with itself through the PyCapsule interface."""

    def __init__(self, src):
        self.src = src

    def __arrow_c_array__(self, requested_schema=None):
        return self.src.__arrow_c_array__(requested_schema)


def _export_setup(nbytes: int):
    def setup() -> dict:
        import numpy as np
        import polars as pl
        import pyarrow as pa

        import dlpackarray

        f = floor_module()
        a = np.ones(nbytes // 4, dtype=np.float32)
        return {
            "np": np,
            "pa": pa,
            "pl": pl,
            "a": a,
            "DLPackArray": dlpackarray.DLPackArray,
            "d": dlpackarray.DLPackArray(a),
            "Producer": f.Producer,
            "p": f.Producer(a),
            "h": f.HostProducer(a),
            "pa_capsules": PyArrowCapsules(pa.array(a)),
        }

    return setup


def _import_setup(nbytes: int):
    def setup() -> dict:
        import numpy as np
        import pyarrow as pa
        import torch

        import dlpackarray

        pa_array = pa.array(np.ones(nbytes // 4, dtype=np.float32))
        return {
            "np": np,
            "torch": torch,
            "consume_arrow": floor_module().consume_arrow,
            "DLPackBufferWrap": floor_module().DLPackBufferWrap,
            "DLPackSpecWrap": floor_module().DLPackSpecWrap,
            "ArrowSpecWrap": floor_module().ArrowSpecWrap,
            "DLPackArray": dlpackarray.DLPackArray,
            "pa_array": pa_array,
            "arrow_only": ArrowOnly(pa_array),
            "d_pre": dlpackarray.DLPackArray(pa_array),
        }

    return setup


def _tensor_setup(rows: int, cell: tuple):
    def setup() -> dict:
        import numpy as np
        import pyarrow as pa

        import dlpackarray

        x = np.ones((rows, *cell), dtype=np.float32)
        fst = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
        return {
            "np": np,
            "pa": pa,
            "x": x,
            "DLPackArray": dlpackarray.DLPackArray,
            "consume_arrow": floor_module().consume_arrow,
            "consume_arrow_device": floor_module().consume_arrow_device,
            "TensorProducer": floor_module().TensorProducer,
            "fst": fst,
            "arrow_only": ArrowOnly(fst),
        }

    return setup


def _duckdb_setup(nbytes: int):
    def setup() -> dict:
        import duckdb
        import numpy as np
        import pyarrow as pa

        import dlpackarray

        a = np.ones(nbytes // 4, dtype=np.float32)
        con = duckdb.connect()
        # Replacement scans find the tables by their Python names: d, p, t.
        return {
            "con": con,
            "d": dlpackarray.DLPackArray(a),
            "p": floor_module().Producer(a),
            "t": pa.table({"value": a}),
            "frame": {"value": a},
        }

    return setup


_FLOOR_EXPORT = "floor: minimal C producer"
_FLOOR_IMPORT = "floor: minimal C consumer"
_FLOOR_WRAP = "floor: DLPackBufferWrap(pa_array)"
_FLOOR_WRAP_ASARRAY = "floor: np.asarray(DLPackBufferWrap(pa_array))"
_SPEC_WRAP = "spec consumer floor: DLPackSpecWrap(pa_array)"
_SPEC_WRAP_ASARRAY = "spec consumer floor: np.asarray(DLPackSpecWrap(pa_array))"
_SPEC_WHY = (
    "b9_floor.DLPackSpecWrap: the wrapper doing what the DLPack spec asks of a consumer "
    "that is not host-only (__dlpack_device__ first; capsule name, major version, device "
    "and dtype checked); a reference row, not a contender"
)
_NOT_A_CONTENDER = " (a floor, not a contender)"
_DEVICE_FLOOR = "device-aware floor: consume_arrow_device(fst)"
_ARROW_SPEC = "spec consumer floor: ArrowSpecWrap(arrow_only)"


def _size_cases(nbytes: int) -> list[Case]:
    size = _label(nbytes)
    common = {
        "unit": "ns",
        "params": {"nbytes": nbytes, "x": nbytes, "series": "size"},
        "smoke": nbytes <= 64 * MB,
    }
    out = [
        Case(
            family="B9",
            name=f"B9/pa.array/{size}",
            title=f"export: pa.array(DLPackArray) of float32, {size}",
            setup=_export_setup(nbytes),
            contenders=[
                Contender("dlpackarray", "pa.array(d)", "a ready DLPackArray"),
                Contender(
                    "dlpackarray (wrap + export)",
                    "pa.array(DLPackArray(a))",
                    "the user's route from a NumPy array",
                ),
                Contender("numpy", "pa.array(a)", "pyarrow's NumPy path (zero-copy)"),
                Contender(
                    _FLOOR_EXPORT,
                    "pa.array(p)",
                    "b9_floor.Producer, ready: pyarrow's device-array import of a minimal "
                    "capsule pair (the route pyarrow takes for DLPackArray)" + _NOT_A_CONTENDER,
                ),
                Contender(
                    "floor: minimal C producer (wrap + export)",
                    "pa.array(Producer(a))",
                    "the floor of the wrap + export route" + _NOT_A_CONTENDER,
                ),
                Contender(
                    "host-only C producer",
                    "pa.array(h)",
                    "the same producer without __arrow_c_device_array__: pyarrow's host import, "
                    "which it takes only when there is no device method",
                ),
                Contender(
                    "pyarrow capsule round trip",
                    "pa.array(pa_capsules)",
                    "pyarrow exporting and importing its own capsules",
                ),
            ],
            anchor="numpy",
            floor=_FLOOR_EXPORT,
            targets=[
                Target("dlpackarray", _FLOOR_EXPORT, "<=", 1.1),
                Target(
                    "dlpackarray (wrap + export)",
                    "floor: minimal C producer (wrap + export)",
                    "<=",
                    1.1,
                ),
                Target("dlpackarray (wrap + export)", "numpy", "<=", 1.0),
            ],
            **common,
        ),
        Case(
            family="B9",
            name=f"B9/pl.Series/{size}",
            title=f"export: pl.Series(DLPackArray) of float32, {size}",
            setup=_export_setup(nbytes),
            contenders=[
                Contender("dlpackarray", "pl.Series(d)", "Arrow stream, one chunk"),
                Contender("dlpackarray (wrap + export)", "pl.Series(DLPackArray(a))"),
                Contender("numpy", "pl.Series(a)", "polars' NumPy path"),
                Contender(
                    _FLOOR_EXPORT,
                    "pl.Series(p)",
                    "polars reading the minimal producer's stream" + _NOT_A_CONTENDER,
                ),
            ],
            anchor="numpy",
            floor=_FLOOR_EXPORT,
            targets=[
                Target("dlpackarray", _FLOOR_EXPORT, "<=", 1.1),
                Target("dlpackarray (wrap + export)", "numpy", "<=", 1.0),
            ],
            **common,
        ),
        Case(
            family="B9",
            name=f"B9/pl.from_arrow/{size}",
            title=f"export: pl.from_arrow(DLPackArray) of float32, {size}",
            setup=_export_setup(nbytes),
            contenders=[
                Contender("dlpackarray", "pl.from_arrow(d)"),
                Contender("numpy", "pl.from_numpy(a)", "polars' NumPy path (a one-column frame)"),
                Contender("pl.Series(a)", "pl.Series(a)"),
                Contender(
                    _FLOOR_EXPORT,
                    "pl.from_arrow(p)",
                    "polars reading the minimal producer" + _NOT_A_CONTENDER,
                ),
            ],
            anchor="numpy",
            floor=_FLOOR_EXPORT,
            targets=[
                Target("dlpackarray", _FLOOR_EXPORT, "<=", 1.1),
                Target("dlpackarray", "numpy", "<=", 1.0),
            ],
            **common,
        ),
        Case(
            family="B9",
            name=f"B9/import/{size}",
            title=f"import: DLPackArray(pa_array), float32 {size}",
            setup=_import_setup(nbytes),
            contenders=[
                Contender(
                    "dlpackarray",
                    "DLPackArray(pa_array)",
                    "pyarrow's __dlpack__ wins the precedence",
                ),
                Contender(
                    "dlpackarray (Arrow capsules)",
                    "DLPackArray(arrow_only)",
                    "the Arrow import path",
                ),
                Contender("pyarrow.to_numpy", "pa_array.to_numpy(zero_copy_only=True)"),
                Contender(
                    _FLOOR_IMPORT,
                    "consume_arrow(arrow_only)",
                    "b9_floor.consume_arrow: the producer's export, the struct moved out into an "
                    "owner, the data pointer read" + _NOT_A_CONTENDER,
                ),
                Contender(
                    _ARROW_SPEC,
                    "ArrowSpecWrap(arrow_only)",
                    "b9_floor.ArrowSpecWrap: __arrow_c_array__ called once from C, the checks "
                    "the C data interface leaves to a consumer of a primitive column (format, "
                    "buffer and child counts, offset and length, nulls), the struct moved into "
                    "the wrapper itself, the buffer protocol answered; the least a conforming "
                    "Arrow import costs, below consume_arrow's separate owner" + _NOT_A_CONTENDER,
                ),
                Contender(
                    _FLOOR_WRAP,
                    "DLPackBufferWrap(pa_array)",
                    "b9_floor.DLPackBufferWrap: __dlpack__ called once from C, the capsule "
                    "kept, nothing validated; the floor of the DLPack route" + _NOT_A_CONTENDER,
                ),
                Contender(_SPEC_WRAP, "DLPackSpecWrap(pa_array)", _SPEC_WHY),
                Contender(
                    "pa_array.__dlpack__",
                    "pa_array.__dlpack__(max_version=(1, 3))",
                    "pyarrow's DLPack export alone (a reference row: no object to hold it)",
                ),
            ],
            anchor="pyarrow.to_numpy",
            floor=_FLOOR_IMPORT,
            targets=[
                Target("dlpackarray (Arrow capsules)", _FLOOR_IMPORT, "<=", 1.1),
                Target("dlpackarray (Arrow capsules)", _ARROW_SPEC, "<=", 1.1),
                Target("dlpackarray", _FLOOR_WRAP, "<=", 1.1),
                Target("dlpackarray", "pyarrow.to_numpy", "<=", 1.0),
            ],
            **common,
        ),
        Case(
            family="B9",
            name=f"B9/np.asarray/{size}",
            title=f"import: np.asarray(DLPackArray(pa_array)), float32 {size}",
            setup=_import_setup(nbytes),
            contenders=[
                Contender("dlpackarray", "np.asarray(DLPackArray(pa_array))"),
                Contender("dlpackarray (Arrow capsules)", "np.asarray(DLPackArray(arrow_only))"),
                Contender("pyarrow.to_numpy", "pa_array.to_numpy(zero_copy_only=True)"),
                Contender(
                    _FLOOR_WRAP_ASARRAY,
                    "np.asarray(DLPackBufferWrap(pa_array))",
                    "NumPy reading the minimal DLPack wrapper through the buffer protocol, the "
                    "first protocol it tries for a non-ndarray" + _NOT_A_CONTENDER,
                ),
                Contender(_SPEC_WRAP_ASARRAY, "np.asarray(DLPackSpecWrap(pa_array))", _SPEC_WHY),
                Contender(
                    "np.from_dlpack(pa_array)",
                    "np.from_dlpack(pa_array)",
                    "NumPy consuming pyarrow's own __dlpack__, no wrapper (a reference row: "
                    "another route)",
                ),
            ],
            anchor="pyarrow.to_numpy",
            floor=_FLOOR_WRAP_ASARRAY,
            targets=[
                Target("dlpackarray", _FLOOR_WRAP_ASARRAY, "<=", 1.1),
                Target("dlpackarray", "pyarrow.to_numpy", "<=", 1.0),
            ],
            **common,
        ),
        Case(
            family="B9",
            name=f"B9/into-torch/{size}",
            title=f"import: torch.from_dlpack(DLPackArray(pa_array)), float32 {size}",
            setup=_import_setup(nbytes),
            contenders=[
                Contender(
                    "dlpackarray",
                    "torch.from_dlpack(DLPackArray(pa_array))",
                    "pyarrow's __dlpack__ wins the precedence",
                ),
                Contender(
                    "dlpackarray (Arrow capsules)",
                    "torch.from_dlpack(DLPackArray(arrow_only))",
                    "the Arrow import path",
                ),
                Contender(
                    "pyarrow.to_numpy",
                    "torch.from_numpy(pa_array.to_numpy(zero_copy_only=True))",
                ),
                Contender(
                    "floor: torch.from_dlpack(pa_array)",
                    "torch.from_dlpack(pa_array)",
                    "torch consuming pyarrow's own __dlpack__" + _NOT_A_CONTENDER,
                ),
                Contender(
                    "torch.from_dlpack(DLPackArray)",
                    "torch.from_dlpack(d_pre)",
                    "torch's consumer alone, for a ready DLPackArray",
                ),
            ],
            anchor="pyarrow.to_numpy",
            floor="floor: torch.from_dlpack(pa_array)",
            targets=[
                Target("dlpackarray", "pyarrow.to_numpy", "<=", 1.0),
                Target("dlpackarray (Arrow capsules)", "pyarrow.to_numpy", "<=", 1.0),
            ],
            **common,
        ),
    ]
    return out


def cases() -> list[Case]:
    out = []
    for nbytes in SIZES:
        out.extend(_size_cases(nbytes))
    for nbytes in (KB, 64 * MB):
        size = _label(nbytes)
        out.append(
            Case(
                family="B9",
                name=f"B9/duckdb/{size}",
                title=f"export: a DuckDB query over a DLPackArray of float32, {size}",
                setup=_duckdb_setup(nbytes),
                contenders=[
                    Contender(
                        "dlpackarray",
                        "con.sql('select sum(value) from d').fetchall()",
                        "DuckDB's replacement scan of the Arrow stream",
                    ),
                    Contender(
                        "numpy",
                        "con.sql('select sum(value) from frame').fetchall()",
                        "DuckDB's scan of a dict of NumPy arrays",
                    ),
                    Contender(
                        "pyarrow.Table",
                        "con.sql('select sum(value) from t').fetchall()",
                        "DuckDB's native pyarrow scan",
                    ),
                    Contender(
                        _FLOOR_EXPORT,
                        "con.sql('select sum(value) from p').fetchall()",
                        "DuckDB reading the minimal producer's stream" + _NOT_A_CONTENDER,
                    ),
                ],
                anchor="numpy",
                floor=_FLOOR_EXPORT,
                targets=[
                    Target("dlpackarray", _FLOOR_EXPORT, "<=", 1.1),
                    Target("dlpackarray", "numpy", "<=", 1.0),
                ],
                params={"nbytes": nbytes, "series": "duckdb"},
            )
        )
    for rows, cell in ((16, (8, 8)), (1024, (64, 64))):
        out.append(
            Case(
                family="B9",
                name=f"B9/tensor-to-numpy/{rows}x{'x'.join(map(str, cell))}",
                title=f"import: FixedShapeTensorArray float32 {rows} x {cell} into numpy",
                setup=_tensor_setup(rows, cell),
                contenders=[
                    Contender("dlpackarray", "np.asarray(DLPackArray(fst))"),
                    Contender(
                        "dlpackarray (Arrow capsules)",
                        "np.asarray(DLPackArray(arrow_only))",
                    ),
                    Contender("DLPackArray(fst)", "DLPackArray(fst)", "the import alone"),
                    Contender("pyarrow.to_numpy_ndarray", "fst.to_numpy_ndarray()"),
                    Contender(
                        "np.from_dlpack(fst)",
                        "np.from_dlpack(fst)",
                        "numpy consuming pyarrow's own __dlpack__ (misreads permuted cells)",
                    ),
                    Contender(
                        _FLOOR_IMPORT,
                        "consume_arrow(fst)",
                        "pyarrow's Arrow export, which DLPackArray(fst) calls, plus the least "
                        "a consumer does with it" + _NOT_A_CONTENDER,
                    ),
                    Contender(
                        _DEVICE_FLOOR,
                        "consume_arrow_device(fst)",
                        "the same through __arrow_c_device_array__, which a consumer that "
                        "takes device data calls first and DLPackArray(fst) calls: pyarrow's "
                        "device export is dearer" + _NOT_A_CONTENDER,
                    ),
                    Contender(
                        "fst.__arrow_c_array__",
                        "fst.__arrow_c_array__()",
                        "pyarrow's Arrow export alone",
                    ),
                ],
                anchor="pyarrow.to_numpy_ndarray",
                floor=_FLOOR_IMPORT,
                targets=[
                    Target("DLPackArray(fst)", _FLOOR_IMPORT, "<=", 1.1),
                    Target("DLPackArray(fst)", _DEVICE_FLOOR, "<=", 1.1),
                    Target("dlpackarray", "pyarrow.to_numpy_ndarray", "<=", 1.0),
                ],
                params={"rows": rows, "cell": list(cell), "series": "tensor"},
            )
        )
        out.append(
            Case(
                family="B9",
                name=f"B9/tensor-export/{rows}x{'x'.join(map(str, cell))}",
                title=f"export: float32 {rows} x {cell} ndarray into a FixedShapeTensorArray",
                setup=_tensor_setup(rows, cell),
                contenders=[
                    Contender("dlpackarray", "pa.array(DLPackArray(x))"),
                    Contender(
                        "pyarrow.from_numpy_ndarray",
                        "pa.FixedShapeTensorArray.from_numpy_ndarray(x)",
                    ),
                    Contender(
                        _FLOOR_EXPORT,
                        "pa.array(TensorProducer(x))",
                        "an arrow.fixed_shape_tensor column from the minimal C producer"
                        + _NOT_A_CONTENDER,
                    ),
                ],
                anchor="pyarrow.from_numpy_ndarray",
                floor=_FLOOR_EXPORT,
                targets=[
                    Target("dlpackarray", _FLOOR_EXPORT, "<=", 1.1),
                    Target("dlpackarray", "pyarrow.from_numpy_ndarray", "<=", 1.0),
                ],
                params={"rows": rows, "cell": list(cell), "series": "tensor-export"},
            )
        )
    return out
