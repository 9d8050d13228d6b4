"""Rules of ``__cuda_array_interface__`` version 3 (a dict; no device access needed)."""

from __future__ import annotations

from dlpackarray.testing import _spec
from dlpackarray.testing.array_interface import TYPESTR
from dlpackarray.testing.report import Recorder, rule_table

CAI = _spec.cuda_array_interface("Python Interface Specification", "python-interface-specification")

RULES = rule_table(
    "cuda_array_interface",
    [
        ("cuda-array-interface.keys", "must", "a dict with shape, typestr, data and version", CAI),
        ("cuda-array-interface.version", "should", "version is 3 (the current revision)", CAI),
        ("cuda-array-interface.shape", "must", "shape is a tuple of non-negative ints", CAI),
        ("cuda-array-interface.typestr", "must", "typestr is a NumPy type string", CAI),
        (
            "cuda-array-interface.data",
            "must",
            "data is a (device pointer: int, read_only: bool) tuple",
            CAI,
        ),
        ("cuda-array-interface.strides", "must", "strides is None or one int per dimension", CAI),
        (
            "cuda-array-interface.stream",
            "must",
            "stream (v3) is absent, None or a non-zero int (0 is disallowed as ambiguous)",
            CAI,
        ),
    ],
)


def check(obj, rec: Recorder) -> None:
    try:
        cai = obj.__cuda_array_interface__
    except Exception as exc:  # noqa: BLE001
        rec.fail("cuda-array-interface.keys", f"reading it raised {type(exc).__name__}: {exc}")
        return
    if not rec.check(
        "cuda-array-interface.keys",
        isinstance(cai, dict) and {"shape", "typestr", "data", "version"} <= set(cai),
        f"got {type(cai).__name__} {sorted(cai) if isinstance(cai, dict) else ''}",
    ):
        return
    rec.check("cuda-array-interface.version", cai["version"] == 3, f"version {cai['version']!r}")
    shape = cai["shape"]
    good_shape = isinstance(shape, tuple) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )
    rec.check("cuda-array-interface.shape", good_shape, f"shape {shape!r}")
    t = cai["typestr"]
    rec.check(
        "cuda-array-interface.typestr",
        isinstance(t, str) and bool(TYPESTR.match(t)),
        f"typestr {t!r}",
    )
    data = cai["data"]
    rec.check(
        "cuda-array-interface.data",
        isinstance(data, tuple)
        and len(data) == 2
        and isinstance(data[0], int)
        and isinstance(data[1], bool),
        f"data {data!r}",
    )
    strides = cai.get("strides")
    rec.check(
        "cuda-array-interface.strides",
        strides is None
        or (
            isinstance(strides, tuple)
            and all(isinstance(s, int) for s in strides)
            and (not good_shape or len(strides) == len(shape))
        ),
        f"strides {strides!r} for shape {shape!r}",
    )
    if cai["version"] == 3 or "stream" in cai:
        stream = cai.get("stream")
        rec.check(
            "cuda-array-interface.stream",
            stream is None
            or (isinstance(stream, int) and not isinstance(stream, bool) and stream != 0),
            f"stream {stream!r}",
        )
