"""B6: ``copy=True`` exports, in GB/s of output, against NumPy and memcpy; B13: every
copying route side by side."""

from __future__ import annotations

from benchmarks.harness import Case, Contender, Target

MB = 1 << 20
# Output bytes -> float32 shapes with exactly that many bytes.
SHAPES = {
    MB: {2: (512, 512), 3: (64, 64, 64)},
    64 * MB: {2: (4096, 4096), 3: (256, 256, 256)},
    512 * MB: {2: (8192, 16384), 3: (512, 512, 512)},
}
LAYOUTS = ("contiguous", "transposed", "strided")
COPY = "d.__dlpack__(max_version=(1, 3), copy=True)"


def _setup(shape: tuple, layout: str):
    def setup() -> dict:
        import numpy as np

        import dlpackarray

        if layout == "contiguous":
            a = np.ones(shape, dtype=np.float32)
        elif layout == "transposed":
            # All axes reversed: the worst case for a row-by-row copy.
            a = np.ones(shape[::-1], dtype=np.float32).T
        else:
            # Every other element of the last axis: no contiguous run at all.
            a = np.ones(shape[:-1] + (2 * shape[-1],), dtype=np.float32)[..., ::2]
        ns = {"np": np, "a": a, "d": dlpackarray.DLPackArray(a)}
        if layout == "contiguous":
            # Pre-faulted destination: pure memory bandwidth, no allocation.
            ns["dst"] = np.zeros(shape, dtype=np.float32)
        return ns

    return setup


def _label(nbytes: int) -> str:
    return f"{nbytes // MB}MB"


def cases() -> list[Case]:
    out = []
    for nbytes, by_ndim in SHAPES.items():
        for ndim, shape in by_ndim.items():
            for layout in LAYOUTS:
                contenders = [Contender("dlpackarray", COPY, "fresh C-contiguous copy per call")]
                if layout == "contiguous":
                    contenders.append(Contender("numpy", "a.copy()", "ndarray.copy: fresh memory"))
                    contenders.append(
                        Contender(
                            "memcpy",
                            "np.copyto(dst, a)",
                            "copy into a pre-faulted array: the machine's copy bandwidth",
                        )
                    )
                    targets = [Target("dlpackarray", "memcpy", ">=", 0.8)]
                else:
                    contenders.append(Contender("numpy", "np.ascontiguousarray(a)"))
                    targets = [Target("dlpackarray", "numpy", ">=", 1.0)]
                out.append(
                    Case(
                        family="B6",
                        name=f"B6/{ndim}d-{layout}/{_label(nbytes)}",
                        title=f"copy=True export, {ndim}-D {layout} float32 {shape}",
                        setup=_setup(shape, layout),
                        contenders=contenders,
                        anchor="numpy",
                        unit="GB/s",
                        nbytes=nbytes,
                        params={
                            "ndim": ndim,
                            "layout": layout,
                            "nbytes": nbytes,
                            "shape": list(shape),
                        },
                        targets=targets,
                        big=nbytes > MB,
                        smoke=nbytes <= 64 * MB,
                    )
                )
    return out + route_cases() + small_cases()


# --- B13: every copying route, side by side -------------------------------------------
# Each case copies one strided view to dense C order by every route a user can take,
# beside the contiguous copy of the same bytes into a pre-faulted array (the machine's
# copy bandwidth, the anchor), NumPy's ascontiguousarray and torch's .contiguous().
# Every dlpackarray route allocates its result, as NumPy's and torch's do; the anchor
# does not, so first-touch page faults count against the routes only.

ROUTE_DTYPES = ("uint8", "int16", "float32", "float64")
ROUTE_SIZES = (4 * MB, 32 * MB, 256 * MB)
# layout -> (dtypes, sizes): transposes everywhere, the other layouts at 32 MB.
ROUTE_LAYOUTS = {
    "2d-T": (ROUTE_DTYPES, ROUTE_SIZES),
    "3d-021": (("uint8", "float32"), (32 * MB,)),
    "3d-210": (("uint8", "float32"), (32 * MB,)),
    "2d-reversed": (("uint8", "float32"), (32 * MB,)),
    "2d-gaps": (("uint8", "float32"), (32 * MB,)),
}
ROUTES = [
    ("DLPackArray(d, copy=True)", "DLPackArray(d, copy=True)", ""),
    ("d.copy()", "d.copy()", ""),
    ("__dlpack__(copy=True)", "d.__dlpack__(max_version=(1, 3), copy=True)", "capsule dropped"),
    ("np.from_dlpack(d, copy=True)", "np.from_dlpack(d, copy=True)", ""),
    ("copy.copy(d)", "copy.copy(d)", ""),
    ("copy.deepcopy(d)", "copy.deepcopy(d)", ""),
    ("AsContiguous (C API)", "as_contiguous(d)", "the C API table's entry, called through ctypes"),
    ("bytes(d)", "bytes(d)", "one copy into the bytes object"),
    ("arrow export", "d.__arrow_c_array__()", "a dense copy: Arrow cannot describe the layout"),
    (
        "pickle (protocol 5)",
        "pickle.dumps(d, protocol=5, buffer_callback=list().append)",
        "a compact pickle: the elements alone when the gaps outweigh them (2d-gaps)",
    ),
]


def _view_of(layout: str, dtype: str, nbytes: int):
    """(strided view, its C-ordered copy) of `nbytes` output bytes."""
    import numpy as np

    itemsize = np.dtype(dtype).itemsize
    items = nbytes // itemsize
    if layout.startswith("2d"):
        # rows x 2 rows: 4096 x 2048 float32 at 32 MB, as in the issue.
        rows = 1 << ((items // 2).bit_length() // 2)
        shape = (rows, items // rows)
        if layout == "2d-gaps":
            base = np.ones((2 * shape[0], 3 * shape[1]), dtype)
            return base[::2, ::3]
        base = np.ones(shape, dtype)
        return base[::-1, ::-1] if layout == "2d-reversed" else base.T
    side = round(items ** (1 / 3))
    base = np.ones((side, side, items // (side * side)), dtype)
    return base.transpose((0, 2, 1) if layout == "3d-021" else (2, 1, 0))


def _as_contiguous():
    """DLPackArray_AsContiguous from the C API capsule (dlpackarray.h), via ctypes."""
    import ctypes

    import dlpackarray

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(dlpackarray._C_API, b"dlpackarray._C_API")
    # major, minor (uint32), size (size_t), then 12 pointers; as_contiguous is the 12th.
    slot = ctypes.c_void_p.from_address(table + 16 + 11 * 8).value
    return ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(slot)


def _route_setup(layout: str, dtype: str, nbytes: int):
    def setup() -> dict:
        import copy
        import pickle

        import numpy as np

        import dlpackarray

        view = _view_of(layout, dtype, nbytes)
        ns = {
            "np": np,
            "copy": copy,
            "pickle": pickle,
            "DLPackArray": dlpackarray.DLPackArray,
            "a": view,
            "d": dlpackarray.DLPackArray(view),
            "src": np.ascontiguousarray(view),
            "dst": np.ascontiguousarray(view) + 0,  # pre-faulted
            "as_contiguous": _as_contiguous(),
        }
        try:
            import torch

            torch.set_num_threads(1)
            # torch has no negative strides: its reversal is a flip of the base.
            ns["t"] = torch.from_numpy(view.base if layout == "2d-reversed" else view)
        except ImportError:
            pass
        return ns

    return setup


def route_cases() -> list[Case]:
    out = []
    for layout, (dtypes, sizes) in ROUTE_LAYOUTS.items():
        for dtype in dtypes:
            for nbytes in sizes:
                torch_stmt = "t.flip((0, 1))" if layout == "2d-reversed" else "t.contiguous()"
                contenders = [
                    Contender("memcpy", "np.copyto(dst, src)", "contiguous copy, pre-faulted"),
                    Contender(
                        "fresh memcpy",
                        "src.copy()",
                        "contiguous copy into fresh memory: the most an allocating route reaches",
                    ),
                    Contender("numpy", "np.ascontiguousarray(a)"),
                    Contender("torch", torch_stmt, "one thread"),
                ]
                contenders += [
                    Contender(f"dlpackarray {label}", stmt, note) for label, stmt, note in ROUTES
                ]
                if layout != "2d-gaps":
                    contenders.pop()  # a transposed pickle ships its span: no copy
                ours = contenders[4:]
                if layout == "2d-T":
                    targets = [Target(c.label, "memcpy", ">=", 0.5) for c in ours]
                else:
                    targets = [
                        Target(c.label, ref, ">=", 1.0) for c in ours for ref in ("numpy", "torch")
                    ]
                out.append(
                    Case(
                        family="B13",
                        name=f"B13/{layout}/{dtype}/{_label(nbytes)}",
                        title=f"every copying route, {layout} {dtype}, {_label(nbytes)} out",
                        setup=_route_setup(layout, dtype, nbytes),
                        contenders=contenders,
                        anchor="memcpy",
                        unit="GB/s",
                        nbytes=nbytes,
                        params={"layout": layout, "dtype": dtype, "nbytes": nbytes},
                        targets=targets,
                        big=True,
                        smoke=nbytes <= 4 * MB,
                    )
                )
    return out


def small_cases() -> list[Case]:
    """Copies of 4 KB, per call: the fixed cost of each route beside NumPy's."""
    out = []
    for dtype, side in (("uint8", 64), ("float32", 32)):

        def setup(dtype=dtype, side=side) -> dict:
            import copy

            import numpy as np

            import dlpackarray

            a = np.ones((side, side), dtype).T
            return {"np": np, "copy": copy, "a": a, "d": dlpackarray.DLPackArray(a)}

        contenders = [Contender("numpy", "np.ascontiguousarray(a)")]
        contenders += [
            Contender(f"dlpackarray {label}", stmt, note)
            for label, stmt, note in ROUTES[:6] + [ROUTES[7]]
            if "DLPackArray(" not in stmt  # the constructor needs the name; below
        ]
        contenders.insert(
            1, Contender("dlpackarray DLPackArray(d, copy=True)", "type(d)(d, copy=True)")
        )
        out.append(
            Case(
                family="B13",
                name=f"B13/small/{dtype}/4KB",
                title=f"every copying route, 2-D transpose {dtype} {side}x{side} (4 KB), per call",
                setup=setup,
                contenders=contenders,
                anchor="numpy",
                unit="ns",
                params={"layout": "2d-T", "dtype": dtype, "nbytes": 4096},
                targets=[Target(c.label, "numpy", "<=", 1.0) for c in contenders[1:]],
            )
        )
    return out
