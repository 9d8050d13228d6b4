"""A 1 GiB Arrow import or export allocates a constant number of bytes beyond its data.

Each route runs in a child process (benchmarks/arrow_memory.py: a fresh heap,
and a crash fails one test) on 256 MiB and on 1 GiB of float64 made
beforehand; its tracemalloc peak and its resident-set growth (peak RSS after
a reset, minus RSS before) must be small and the same for both sizes, and the
result must use the source's memory.  A copy anywhere on the route would grow
by the data's size (768 MiB between the two).
"""

import json
import os
import sys

import pytest
from conftest import assert_clean_exit, require, run_python

require("pyarrow", "the Arrow routes under test")
pytest.importorskip("numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20
SIZES = (256 * MiB, 1024 * MiB)
# Constant bounds, far below the smaller size: code pages touched for the
# first time, allocator arenas and the Arrow structs, never the data.
TRACED_LIMIT = 64 * 1024
RSS_LIMIT = 16 * MiB
SIZE_DEPENDENCE_LIMIT = 8 * MiB


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _measure(route: str, nbytes: int) -> dict:
    code = (
        f"import sys, json; sys.path.insert(0, {ROOT!r}); "
        "from benchmarks.arrow_memory import measure; "
        f"print(json.dumps(measure({route!r}, {nbytes})))"
    )
    proc = run_python(code, timeout=300)
    assert_clean_exit(proc, f"{route} of {nbytes} bytes")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")
@pytest.mark.skipif(
    _available_memory() < 3 * 1024 * MiB,
    reason="needs 3 GiB of available memory (1 GiB of data, twice if a route copied)",
)
@pytest.mark.parametrize("route", ["import", "import-arrow", "export", "export-stream"])
def test_arrow_route_allocates_a_constant_beyond_its_data(route):
    small, large = (_measure(route, n) for n in SIZES)
    for r in (small, large):
        assert r["shares"], r
        assert r["tracemalloc_peak"] <= TRACED_LIMIT, r
        assert r["rss_growth"] <= RSS_LIMIT, r
    assert abs(large["rss_growth"] - small["rss_growth"]) <= SIZE_DEPENDENCE_LIMIT, (small, large)
    assert abs(large["tracemalloc_peak"] - small["tracemalloc_peak"]) <= 4096, (small, large)
