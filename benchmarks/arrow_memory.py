"""Memory of the Arrow routes: what an import or export allocates beyond its data.

``python -m benchmarks.arrow_memory [NBYTES ...]`` prints, for each route and
size, the tracemalloc peak and the growth of the resident set (peak RSS, Linux's
VmHWM after a reset, minus RSS before) while the route runs on float64 data
made beforehand.  A zero-copy route grows neither with the size: the figures
for 256 MiB and 1 GiB should be the same few pages.
tests/arrow/test_arrow_memory.py runs :func:`measure` in a child process and bounds
the figures; this script reports them (docs/arrow.md).
"""

from __future__ import annotations

import json
import sys

MiB = 1 << 20
ROUTES = ("import", "import-arrow", "export", "export-stream")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        import os

        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    # Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class _ArrowOnly:
    """Only ``__arrow_c_array__``: forces DLPackArray's Arrow import."""

    def __init__(self, src):
        self.src = src

    def __arrow_c_array__(self, requested_schema=None):
        return self.src.__arrow_c_array__(requested_schema)


def measure(route: str, nbytes: int) -> dict:
    """Runs ``route`` once on ``nbytes`` of float64 data; returns the figures.

    ``import``: ``np.asarray(DLPackArray(pa_array))``; ``import-arrow`` the
    same through the Arrow capsules; ``export``: ``pa.array(DLPackArray(x))``;
    ``export-stream``: ``pa.chunked_array(DLPackArray(x))`` (the stream).
    ``shares`` says whether the result uses the source's memory.
    """
    import gc
    import tracemalloc

    import numpy as np
    import pyarrow as pa

    from dlpackarray import DLPackArray

    x = np.ones(nbytes // 8)
    src = pa.array(x) if route.startswith("import") else x
    gc.collect()
    if not _reset_peak():
        raise RuntimeError("cannot reset the peak RSS (/proc/self/clear_refs)")
    before = _rss()
    tracemalloc.start()
    if route == "import":
        out = np.asarray(DLPackArray(src))
    elif route == "import-arrow":
        out = np.asarray(DLPackArray(_ArrowOnly(src)))
    elif route == "export":
        out = pa.array(DLPackArray(src))
    elif route == "export-stream":
        out = pa.chunked_array(DLPackArray(src))
    else:
        raise ValueError(f"unknown route {route!r}")
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = _peak_rss() - before
    if route.startswith("import"):
        shares = out.ctypes.data == np.from_dlpack(src).ctypes.data
    else:
        chunk = out if route == "export" else out.chunk(0)
        shares = chunk.buffers()[1].address == x.ctypes.data
    return {
        "route": route,
        "nbytes": nbytes,
        "tracemalloc_peak": traced_peak,
        "rss_growth": rss_growth,
        "shares": bool(shares),
    }


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [256 * MiB, 1024 * MiB]
    import subprocess

    # One process per measurement: a fresh heap, no earlier route's pages.
    for nbytes in sizes:
        for route in ROUTES:
            code = (
                "import json; from benchmarks.arrow_memory import measure; "
                f"print(json.dumps(measure({route!r}, {nbytes})))"
            )
            out = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
            r = json.loads(out)
            print(
                f"{route:14s} {nbytes // MiB:5d} MiB: "
                f"tracemalloc peak {r['tracemalloc_peak']:8d} B, "
                f"RSS growth {r['rss_growth'] / 1024:8.0f} KiB, shares memory: {r['shares']}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
