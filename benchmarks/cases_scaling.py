"""B7: wrap + export must not grow with the data (zero-copy) and grow only
mildly with ndim (shape and strides are copied once per export)."""

from __future__ import annotations

from benchmarks.harness import Case, Contender

WRAP_EXPORT = "DLPackArray(a).__dlpack__(max_version=(1, 3))"
# 1 element up to 1 GiB of uint8; np.empty does not touch the pages, so even
# the largest array costs address space, not memory.
SIZES = [1, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26, 1 << 28, 1 << 30]
NDIMS = [1, 2, 4, 8, 16, 24, 32]


def _size_setup(n: int):
    def setup() -> dict:
        import numpy as np

        from dlpackarray import DLPackArray

        return {"a": np.empty(n, dtype=np.uint8), "DLPackArray": DLPackArray}

    return setup


def _ndim_setup(ndim: int):
    def setup() -> dict:
        import numpy as np
        from numpy.lib.stride_tricks import as_strided

        from dlpackarray import DLPackArray

        # Every extent 2 (so no dimension can be skipped as length-1) over a
        # single element with stride 0: 2**32 logical elements, 1 byte stored.
        a = as_strided(
            np.zeros(1, dtype=np.uint8),
            shape=(2,) * ndim,
            strides=(0,) * ndim,
            writeable=True,
        )
        return {"a": a, "DLPackArray": DLPackArray}

    return setup


def _fmt_size(n: int) -> str:
    for unit, k in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << k:
            return f"{n >> k}{unit}"
    return f"{n}B"


def cases() -> list[Case]:
    contenders = [
        Contender("dlpackarray", WRAP_EXPORT, "wrap a numpy array, export, drop both"),
        Contender("numpy", "a.__dlpack__(max_version=(1, 3))", "numpy's own export, for scale"),
    ]
    out = []
    for n in SIZES:
        out.append(
            Case(
                family="B7",
                name=f"B7/size/{_fmt_size(n)}",
                title=f"wrap + export, uint8[{n}]",
                setup=_size_setup(n),
                contenders=contenders,
                anchor="numpy",
                params={"series": "size", "x": n},
                smoke=n <= 64 << 20,
            )
        )
    for nd in NDIMS:
        out.append(
            Case(
                family="B7",
                name=f"B7/ndim/{nd}",
                title=f"wrap + export, uint8 of shape (2,)*{nd}",
                setup=_ndim_setup(nd),
                contenders=contenders,
                anchor="numpy",
                params={"series": "ndim", "x": nd},
            )
        )
    return out
