"""Wall-time ratios across code placements (issue 23, round 10).

A route a few thousand instructions long moves by 10-25 % in wall time with
where the linker places its hot code (which lines share a set of the
instruction cache), so one build's ratio says little about a change.
``tools/placement_sweep.sh`` builds the same source at several placements
(CMake ``DLPACKARRAY_CODE_SHIFT``); the runs of each build are written by
``python -m benchmarks.run --name <prefix>-<label>-shift<N>-set<K>``, and

    python -m benchmarks.placement DIR [--export]

prints, per route and label (for example ``plt`` and ``noplt``), the range of
the per-run median paired ratio at each placement and over all of them.
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
import statistics
import sys

from benchmarks.harness import _ratio

# (case, contender, reference, route label)
IMPORT_PAIRS = [
    ("B9/np.asarray/1KB", "dlpackarray",
     "spec consumer floor: np.asarray(DLPackSpecWrap(pa_array))",
     "np.asarray(DLPackArray(pa_array)) / spec floor"),
    ("B9/import/1KB", "dlpackarray", "spec consumer floor: DLPackSpecWrap(pa_array)",
     "DLPackArray(pa_array) / spec floor"),
    ("B9/import/1KB", "dlpackarray (Arrow capsules)",
     "spec consumer floor: ArrowSpecWrap(arrow_only)", "Arrow capsules / spec floor"),
    ("B9/tensor-to-numpy/16x8x8", "DLPackArray(fst)",
     "device-aware floor: consume_arrow_device(fst)", "tensor import / device-aware floor"),
    ("B2/into-numpy", "dlpackarray", "numpy", "B2 / numpy"),
    ("B2/asarray-ready", "dlpackarray", "floor: np.asarray(array.array)",
     "B2/asarray-ready / floor"),
]  # fmt: skip
EXPORT_PAIRS = [
    ("B1/producer", "dlpackarray", "numpy", "B1 / numpy"),
    ("B9/pa.array/1KB", "dlpackarray", "floor: minimal C producer", "pa.array(d) / floor"),
    ("B9/pa.array/1KB", "dlpackarray (wrap + export)",
     "floor: minimal C producer (wrap + export)", "pa.array(DLPackArray(x)) / floor"),
    ("B9/tensor-export/16x8x8", "dlpackarray", "floor: minimal C producer",
     "tensor export / floor"),
]  # fmt: skip

_NAME = re.compile(r"-(?P<label>[A-Za-z0-9]+)-shift(?P<shift>\d+)-set\d+\.json$")


def run_ratios(result: dict, case: str, contender: str, reference: str) -> list[float]:
    """The median per-round paired ratio of each run of one result file, as
    the harness computes it for a target (``_ratio``'s ``paired_median``)."""
    return [
        _ratio(record, contender, reference)["paired_median"]
        for run in result["runs"]
        for record in run
        if record["name"] == case
    ]


def collect(directory: pathlib.Path, pairs) -> dict:
    """(route, label, shift) -> every run's ratio, from the sweep's JSON files."""
    found: dict = collections.defaultdict(list)
    for path in sorted(directory.glob("*.json")):
        m = _NAME.search(path.name)
        if not m:
            continue
        result = json.loads(path.read_text())
        for case, contender, reference, route in pairs:
            key = (route, m.group("label"), int(m.group("shift")))
            found[key] += run_ratios(result, case, contender, reference)
    return found


def table(found: dict, pairs) -> str:
    """A Markdown table: per route and label, each placement's range of ratios and
    the median and range over all placements."""
    shifts = sorted({k[2] for k in found})
    labels = sorted({k[1] for k in found})
    lines = [
        "| route | build | " + " | ".join(f"shift {s}" for s in shifts) + " | all placements |",
        "|---|---|" + "---|" * (len(shifts) + 1),
    ]
    for route in dict.fromkeys(p[3] for p in pairs):
        for label in labels:
            every = [r for s in shifts for r in found.get((route, label, s), [])]
            if not every:
                continue
            cells = []
            for s in shifts:
                v = found.get((route, label, s), [])
                cells.append(f"{min(v):.2f}-{max(v):.2f}" if v else "-")
            lines.append(
                f"| {route} | {label} | " + " | ".join(cells) + f" | median "
                f"{statistics.median(every):.2f} ({min(every):.2f}-{max(every):.2f}) |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    pairs = EXPORT_PAIRS if "--export" in argv else IMPORT_PAIRS
    directory = pathlib.Path(next(a for a in argv if not a.startswith("--")))
    print(table(collect(directory, pairs), pairs))


if __name__ == "__main__":
    main(sys.argv[1:])
