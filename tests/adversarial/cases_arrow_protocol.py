"""Misused Arrow stream and array protocols on the Arrow import paths, over
the valid bases of cases_arrow.py: stream callbacks that are NULL, fail or
lie (``get_schema``, ``get_next``, ``get_last_error``, ``release``), empty
streams and streams of several chunks (with ``copy=False``, with a malformed
later chunk), device streams whose chunks are on another device type, array
methods returning junk instead of a (schema, array) pair, and device arrays
on devices dlpackarray cannot read.

Each outcome is exact: the exception type and message, or the layout of the
valid result, and in both cases the release calls the importer made.
"""

from __future__ import annotations

import json
import re

from cases import Case
from cases_arrow import _BY_NAME, BASES, DEVICE_BASES, PATHS, Base, importing

# -- stream protocol misuse -------------------------------------------------------------------


def _stream(path, schema_levels, chunks, **kw):
    """A body over a forged stream; ``chunks(forge)`` makes its arrays."""
    device = path == "device_stream"
    method = PATHS[path]

    def build(forge):
        from arrow_forge import producer

        return producer(method, forge.stream(schema_levels, chunks(forge), device=device, **kw))

    return build


def _chunks(base: Base, n: int, device: bool, rows=(3,), bad=None):
    def make(forge):
        out = []
        for i in range(n):
            levels = [{"format": f} for f in base.formats]
            if bad is not None and i == bad[0]:
                levels[0].update(bad[1])
            r = rows[i % len(rows)]
            label = f"chunk{i}"
            if device:
                d = forge.device_array(levels, r, label=label)
                out.append(d)
            else:
                out.append(forge.array(levels, r, label=label))
        return out

    return make


def _protocol_cases():
    out = []
    f32 = _BY_NAME["f32"]
    for path in ("stream", "device_stream"):
        device = path == "device_stream"
        method = PATHS[path]
        pre = f"arrow/{path}/protocol"

        def add(
            cid, build, exc=None, text=None, value=None, rel="", copy=None, _pre=pre, _path=path
        ):
            if exc is None:
                out.append(
                    Case(
                        f"{_pre}/{cid}",
                        importing(_path, build, copy),
                        value={"layout": value, "releases": rel},
                    )
                )
            else:
                pattern = re.escape(text) + r".* \[releases=" + re.escape(rel) + r"\]$"
                out.append(Case(f"{_pre}/{cid}", importing(_path, build, copy), exc, pattern))

        names = ("get_schema", "get_next", "get_last_error")
        combos = [(n,) for n in names] + [
            ("get_schema", "get_next"),
            ("get_next", "get_last_error"),
            ("get_schema", "get_last_error"),
            names,
        ]
        for missing in combos:
            text = (
                f"the Arrow stream from {method} has a NULL {' and '.join(missing)} callback; "
                "the C stream interface requires get_schema, get_next, get_last_error and release"
            )
            add(
                "missing/" + "+".join(missing),
                _stream(path, f32.levels(), _chunks(f32, 1, device), missing=missing),
                ValueError,
                text,
                rel="chunk0=0,stream=1",
            )
        add(
            "missing/release",
            _stream(path, f32.levels(), _chunks(f32, 1, device), missing=("release",)),
            ValueError,
            f"the capsule from {method} has already been consumed",
            rel="chunk0=0,stream=0",
        )
        add(
            "missing/all",
            _stream(path, f32.levels(), _chunks(f32, 1, device), missing=(*names, "release")),
            ValueError,
            f"the capsule from {method} has already been consumed",
            rel="chunk0=0,stream=0",
        )
        for rc in (1, 5, 22, 12, 38, -1, 2**31 - 1):
            for err, shown in (
                (b"producer failure", "producer failure"),
                (None, "no message"),
                (b"bad \xff byte", "bad \ufffd byte"),
                (b"", ""),
            ):
                tag = "null" if err is None else (err.hex() or "empty")
                add(
                    f"get_schema_fails/{rc}/{tag}",
                    _stream(path, f32.levels(), _chunks(f32, 1, device), schema_rc=rc, error=err),
                    BufferError,
                    f"the Arrow stream failed in get_schema (error {rc}): {shown}",
                    rel="chunk0=0,stream=1",
                )
            for first in (True, False):
                codes = (rc,) if first else (0, rc)
                add(
                    f"get_next_fails/{rc}/{'first' if first else 'second'}",
                    _stream(path, f32.levels(), _chunks(f32, 2, device), next_rc=codes),
                    BufferError,
                    f"the Arrow stream failed in get_next (error {rc}): producer failure",
                    rel=("chunk0=0" if first else "chunk0=1")
                    + ",chunk1=0,stream=1,stream.schema=1",
                )
        add(
            "get_schema_without_schema",
            _stream(path, None, _chunks(f32, 1, device)),
            ValueError,
            f"get_schema of the Arrow stream from {method} returned 0 (success) but no schema",
            rel="chunk0=0,stream=1",
        )
        # Chunks: empty streams, several chunks, a malformed later chunk.
        for base in BASES:
            if device and base.name not in DEVICE_BASES:
                continue
            add(
                f"{base.name}/empty",
                _stream(path, base.levels(), lambda forge: []),
                value=base.empty(),
                rel="stream=1,stream.schema=1",
            )
            two = base.copied(6)
            add(
                f"{base.name}/two_chunks",
                _stream(path, base.levels(), _chunks(base, 2, device)),
                value=two,
                rel="chunk0=1,chunk1=1,stream=1,stream.schema=1",
            )
            add(
                f"{base.name}/two_chunks_copy_false",
                _stream(path, base.levels(), _chunks(base, 2, device)),
                BufferError,
                "arrives in 2 non-empty chunks; making one tensor of it needs a copy and "
                "copy=False was given",
                rel="chunk0=1,chunk1=1,stream=1,stream.schema=1",
                copy=False,
            )
            if base.name != "bits":
                add(
                    f"{base.name}/one_nonempty_among_empty",
                    _stream(path, base.levels(), _chunks(base, 3, device, rows=(0, 3, 0))),
                    value=base.ok(),
                    rel="chunk0=1,chunk1=1,chunk2=1,stream=1,stream.schema=1",
                )
            for i, (tag, bad, text) in enumerate(
                (
                    ("length", {"length": -1}, "the Arrow array has a negative length"),
                    ("buffers", {"buffers": "null"}, "the Arrow array has a NULL buffers array"),
                    ("null_count", {"null_count": -7}, "the Arrow array has null_count -7"),
                    ("dictionary", {"dictionary": True}, "the Arrow array has a dictionary"),
                    (
                        "offset",
                        {"offset": 2**63 - 1},
                        "the Arrow array has offset 9223372036854775807 + length 3 beyond int64",
                    ),
                )
            ):
                add(
                    f"{base.name}/bad_second_chunk/{tag}",
                    _stream(path, base.levels(), _chunks(base, 3, device, bad=(1, bad))),
                    ValueError,
                    text,
                    rel="chunk0=1,chunk1=1,chunk2=0,stream=1,stream.schema=1",
                )
                del i
    # Device streams: every chunk on the announced device type.
    for announced, chunk_type in ((2, 1), (1, 2), (13, 1), (1, 10)):

        def build(forge, announced=announced, chunk_type=chunk_type):
            from arrow_forge import producer

            d = forge.device_array([{"format": b"f"}], 3, label="chunk0", device_type=chunk_type)
            st = forge.stream([{"format": b"f"}], [d], device=True, device_type=announced)
            return producer(PATHS["device_stream"], st)

        text = (
            f"the Arrow device stream from __arrow_c_device_stream__ announced device type "
            f"{announced} but get_next returned an array on device type {chunk_type}"
        )
        pattern = re.escape(text) + r".* \[releases=chunk0=1,stream=1,stream\.schema=1\]$"
        out.append(
            Case(
                f"arrow/device_stream/protocol/device_mismatch/{announced}/{chunk_type}",
                importing("device_stream", build),
                ValueError,
                pattern,
            )
        )
    # Array pairs: junk results and capsule names.
    for path in ("array", "device_array"):
        method = PATHS[path]
        for tag, junk in (
            ("none", lambda f, s, a: None),
            ("one", lambda f, s, a: (s,)),
            ("three", lambda f, s, a: (s, a, a)),
            ("list", lambda f, s, a: [s, a]),
            ("swapped", lambda f, s, a: (a, s)),
            ("schema_twice", lambda f, s, a: (s, s)),
            ("ints", lambda f, s, a: (1, 2)),
        ):

            def build(forge, junk=junk, path=path, method=method):
                from arrow_forge import producer

                s, a = forge.pair([{"format": b"f"}], [{"format": b"f"}], device=path != "array")
                return producer(method, junk(forge, s, a))

            exc_text = (
                f"{method} must return a (schema, array) pair of PyCapsules"
                if tag in ("none", "one", "three", "list")
                else f"{method} returned "
            )
            pattern = re.escape(exc_text) + r".* \[releases=array=0,schema=0\]$"
            out.append(
                Case(
                    f"arrow/{path}/protocol/junk/{tag}", importing(path, build), TypeError, pattern
                )
            )
        # Device arrays on devices dlpackarray cannot read.
        if path == "device_array":
            for dt, name in ((4, "OpenCL"), (10, "ROCm"), (8, "Metal"), (99, "unknown")):

                def build(forge, dt=dt, method=method):
                    from arrow_forge import producer

                    s = forge.capsule(forge.schema([{"format": b"f"}]), b"arrow_schema")
                    d = forge.device_array([{"format": b"f"}], 3, device_type=dt, device_id=0)
                    return producer(method, (s, forge.capsule(d, b"arrow_device_array")))

                # Refused before the array is moved out: it stays with its capsule.
                text = f"the Arrow device array lives on device type {dt} ({name}, id 0)"
                pattern = re.escape(text) + r".* \[releases=array=0,schema=0\]$"
                out.append(
                    Case(
                        f"arrow/device_array/protocol/device/{dt}",
                        importing(path, build),
                        BufferError,
                        pattern,
                    )
                )
    return out


def cases():
    out = _protocol_cases()
    # Every expected value must be JSON (what the worker sends back).
    for case in out:
        json.dumps(case.value)
    return out
