"""B9: the Arrow bridge.

Export: ``pa.array(d)`` and ``pl.Series(d)`` for float32 DLPackArrays of
1 KB ... 1 GB; zero-copy, so the time should be flat in size.  Import:
``torch.from_dlpack(DLPackArray(pa_array))`` against pyarrow's own NumPy
route, and an N-D ``FixedShapeTensorArray`` into NumPy against
``to_numpy_ndarray()``.
"""

from __future__ import annotations

from benchmarks.harness import Case, Contender, Target

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
SIZES = (KB, MB, 64 * MB, GB)


def _label(nbytes: int) -> str:
    for unit, name in ((GB, "GB"), (MB, "MB"), (KB, "KB")):
        if nbytes >= unit:
            return f"{nbytes // unit}{name}"
    return f"{nbytes}B"


class ArrowOnly:
    """Exposes only ``__arrow_c_array__``: forces DLPackArray's Arrow import."""

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

        a = np.ones(nbytes // 4, dtype=np.float32)
        return {"np": np, "pa": pa, "pl": pl, "a": a, "d": dlpackarray.DLPackArray(a)}

    return setup


def _import_setup(nbytes: int):
    def setup() -> dict:
        import numpy as np
        import pyarrow as pa
        import torch

        import dlpackarray

        pa_array = pa.array(np.ones(nbytes // 4, dtype=np.float32))
        return {
            "torch": torch,
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
            "DLPackArray": dlpackarray.DLPackArray,
            "fst": fst,
            "arrow_only": ArrowOnly(fst),
        }

    return setup


def cases() -> list[Case]:
    out = []
    for nbytes in SIZES:
        common = {
            "unit": "ns",
            "params": {"nbytes": nbytes, "x": nbytes, "series": "size"},
            "big": nbytes >= GB,
            "smoke": nbytes <= 64 * MB,
        }
        out.append(
            Case(
                family="B9",
                name=f"B9/pa.array/{_label(nbytes)}",
                title=f"export: pa.array(DLPackArray) of float32, {_label(nbytes)}",
                setup=_export_setup(nbytes),
                contenders=[
                    Contender("dlpackarray", "pa.array(d)", "Arrow PyCapsule interface"),
                    Contender("numpy", "pa.array(a)", "pyarrow's NumPy path (zero-copy)"),
                ],
                anchor="numpy",
                **common,
            )
        )
        out.append(
            Case(
                family="B9",
                name=f"B9/pl.Series/{_label(nbytes)}",
                title=f"export: pl.Series(DLPackArray) of float32, {_label(nbytes)}",
                setup=_export_setup(nbytes),
                contenders=[
                    Contender("dlpackarray", "pl.Series(d)", "Arrow stream, one chunk"),
                    Contender("numpy", "pl.Series(a)", "polars' NumPy path"),
                ],
                anchor="numpy",
                **common,
            )
        )
        out.append(
            Case(
                family="B9",
                name=f"B9/into-torch/{_label(nbytes)}",
                title=f"import: torch.from_dlpack(DLPackArray(pa_array)), float32 {_label(nbytes)}",
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
                        "torch.from_dlpack(pa_array)",
                        "torch.from_dlpack(pa_array)",
                        "torch consuming pyarrow's own __dlpack__",
                    ),
                    Contender(
                        "floor: torch.from_dlpack(DLPackArray)",
                        "torch.from_dlpack(d_pre)",
                        "torch's consumer alone, for a ready DLPackArray (not a contender)",
                    ),
                ],
                anchor="pyarrow.to_numpy",
                targets=[
                    Target("dlpackarray", "pyarrow.to_numpy", "<=", 1.0),
                    Target("dlpackarray (Arrow capsules)", "pyarrow.to_numpy", "<=", 1.0),
                ],
                **common,
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
                    Contender("pyarrow.to_numpy_ndarray", "fst.to_numpy_ndarray()"),
                    Contender(
                        "np.from_dlpack(fst)",
                        "np.from_dlpack(fst)",
                        "numpy consuming pyarrow's own __dlpack__",
                    ),
                    Contender(
                        "floor: fst.__dlpack__",
                        "fst.__dlpack__(max_version=(1, 3))",
                        "pyarrow's DLPack export alone, which DLPackArray(fst) no longer "
                        "calls: it misreads permuted cells (not a contender)",
                    ),
                    Contender(
                        "floor: fst.__arrow_c_array__",
                        "fst.__arrow_c_array__()",
                        "pyarrow's Arrow export alone, which both dlpackarray rows call (not "
                        "a contender)",
                    ),
                ],
                anchor="pyarrow.to_numpy_ndarray",
                targets=[
                    Target("dlpackarray", "pyarrow.to_numpy_ndarray", "<=", 0.5),
                    Target("dlpackarray (Arrow capsules)", "pyarrow.to_numpy_ndarray", "<=", 0.5),
                ],
                params={"rows": rows, "cell": list(cell), "series": "tensor"},
            )
        )
    return out
