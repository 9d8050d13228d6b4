"""B6: ``copy=True`` exports, in GB/s of output, against NumPy and memcpy."""

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
    return out
