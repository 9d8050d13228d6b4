"""benchmarks/placement.py: a sweep's runs read back per route, build and placement."""

from __future__ import annotations

import json
import statistics

from benchmarks import placement


def _result(ours: list[list[float]], ref: list[list[float]]) -> dict:
    case = "B9/import/1KB"
    return {
        "runs": [
            [
                {
                    "name": case,
                    "unit": "ns",
                    "contenders": {
                        "dlpackarray": {"samples_ns": mine, "median_ns": statistics.median(mine)},
                        "spec consumer floor: DLPackSpecWrap(pa_array)": {
                            "samples_ns": other,
                            "median_ns": statistics.median(other),
                        },
                    },
                },
                {"name": "B2/into-numpy", "contenders": {}},
            ]
            for mine, other in zip(ours, ref, strict=True)
        ]
    }


PAIRS = [
    (
        "B9/import/1KB",
        "dlpackarray",
        "spec consumer floor: DLPackSpecWrap(pa_array)",
        "import / spec floor",
    )
]


def test_ratios_are_each_runs_median_of_paired_rounds():
    result = _result([[110, 120, 300], [100, 100, 100]], [[100, 100, 100], [50, 100, 200]])
    # Run 1: 1.1, 1.2, 3.0 -> 1.2; run 2: 2.0, 1.0, 0.5 -> 1.0 (pairs, not medians' ratio).
    assert placement.run_ratios(result, *PAIRS[0][:3]) == [1.2, 1.0]


def test_table_gives_each_placement_and_all_of_them(tmp_path):
    files = {
        "x-plt-shift0-set1.json": _result([[120] * 3], [[100] * 3]),
        "x-plt-shift1024-set1.json": _result([[130] * 3, [110] * 3], [[100] * 3, [100] * 3]),
        "x-noplt-shift0-set1.json": _result([[100] * 3], [[100] * 3]),
        "x-noplt-shift1024-set2.json": _result([[105] * 3], [[100] * 3]),
        "unrelated.json": {"runs": []},
    }
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
    found = placement.collect(tmp_path, PAIRS)
    assert found[("import / spec floor", "plt", 1024)] == [1.3, 1.1]
    lines = placement.table(found, PAIRS).splitlines()
    assert lines[0] == "| route | build | shift 0 | shift 1024 | all placements |"
    assert lines[2] == (
        "| import / spec floor | noplt | 1.00-1.00 | 1.05-1.05 | median 1.02 (1.00-1.05) |"
    )
    assert lines[3] == (
        "| import / spec floor | plt | 1.20-1.20 | 1.10-1.30 | median 1.20 (1.10-1.30) |"
    )
