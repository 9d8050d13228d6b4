"""The plain-column parse (``arrow_parse_plain_column`` in cpp/src/arrow_import.cpp):
a lone schema node without children, metadata, dictionary or name, whose
format is one character, is read without the full parse (or the memo's
fingerprint), so it must answer exactly as the full parse does.

The oracle is the same node with an empty metadata blob (no entries): that
means the same type to the Arrow spec, but takes the full parse.  Every
outcome -- shape, dtype, bytes, or the exception's type and message -- must be
equal, for every one-byte format and the nodes around the fast path's edges
(released, dictionary-encoded, with children, with a name).
"""

from __future__ import annotations

import numpy as np
import pytest
from arrow_forge import LEAF_DTYPES, Forge, metadata_blob, producer
from conftest import require

from dlpackarray import DLPackArray

# Forges whose structs an imported array may still hold.
_KEEP: list = []

EMPTY_METADATA = metadata_blob([])


def _producer(top: dict):
    f = Forge()
    _KEEP.append(f)
    fmt = top.get("format", b"f")
    data_format = fmt if fmt in LEAF_DTYPES else b"f"
    schema = [{"name": None, **top}]
    return producer("__arrow_c_array__", f.pair(schema, [{"format": data_format}], 3))


def outcome(top: dict):
    try:
        x = np.asarray(DLPackArray(_producer(top)))
    except Exception as exc:  # every refusal is part of the outcome
        return (type(exc).__name__, str(exc))
    return ("ok", x.shape, x.dtype.str, x.tobytes())


def full_parse_outcome(top: dict):
    return outcome({**top, "metadata": EMPTY_METADATA})


ONE_BYTE_FORMATS = [bytes([c]) for c in range(1, 256)]


@pytest.mark.parametrize("fmt", ONE_BYTE_FORMATS, ids=lambda f: f"0x{f[0]:02x}")
@pytest.mark.parametrize("name", [None, b""], ids=["name NULL", "name empty"])
def test_every_one_byte_format_reads_as_the_full_parse_reads_it(fmt, name):
    top = {"format": fmt, "name": name}
    assert outcome(top) == full_parse_outcome(top)


EDGES = {
    "released": {"release": False},
    "dictionary": {"dictionary": True},
    "named": {"name": b"x"},
    "name not UTF-8": {"name": b"\xff"},
    "two-byte format": {"format": b"vu"},
    "empty format": {"format": b""},
    "list without its child": {"format": b"+w:3", "n_children": 0},
    "bool8 storage": {"format": b"c"},
}


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_nodes_beside_the_fast_path_read_as_the_full_parse_reads_them(edge):
    top = {"format": b"f", **EDGES[edge]}
    assert outcome(top) == full_parse_outcome(top)


def test_the_oracle_reads_numbers_and_refuses_the_rest():
    # The comparison above would pass an importer that refuses everything.
    for fmt, dtype in LEAF_DTYPES.items():
        result = outcome({"format": fmt})
        assert result[:3] == ("ok", (3,), np.dtype(dtype).str), fmt
    assert outcome({"format": b"b"})[:3] == ("ok", (3,), "|b1")
    assert outcome({"format": b"u"})[0] == "TypeError"
    kind, message = outcome({"format": b"f", "release": False})
    assert kind == "ValueError" and "released" in message


@pytest.mark.parametrize("kind", ["float32", "bool"])
def test_pyarrow_columns_take_the_fast_path_and_keep_their_values(kind):
    pa = require("pyarrow", "an Arrow PyCapsule producer")
    values = {
        "float32": lambda: pa.array([1.5, 2.5, 3.5], pa.float32()),
        "bool": lambda: pa.array([True, False, True]),
    }[kind]()
    # pyarrow exports an empty name and no metadata: the plain-column parse.
    x = np.asarray(DLPackArray(producer("__arrow_c_array__", values.__arrow_c_array__())))
    np.testing.assert_array_equal(x, values.to_numpy(zero_copy_only=False))
