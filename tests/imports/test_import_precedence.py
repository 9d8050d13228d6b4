"""``DLPackArray(obj)`` reads the protocol that docs/protocols.rst's precedence puts first.

The documentation states the import order once (the "Import: protocol precedence" list of
docs/protocols.rst).  Here every combination of the seven protocols an object can offer is
built, each protocol handing out different data (recognisable by shape and dtype), and the
array must hold the data of the protocol the documented list puts first; the list itself is
read from the page, so the page and the behaviour cannot drift apart.
"""

from __future__ import annotations

import itertools
import pathlib
import re

import numpy as np
import pytest
from conftest import require

from dlpackarray import DLPackArray

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "protocols.rst"

# One source per protocol, each with a shape and dtype of its own.
DLPACK_SRC = np.arange(6, dtype=np.int8)
STRUCT_SRC = np.arange(3, dtype=np.float32)
IFACE_SRC = np.arange(4, dtype=np.int16).reshape(2, 2)
ARROW_SRC = np.arange(5, dtype=np.float64)
ARRAY_SRC = np.arange(9, dtype=np.uint16).reshape(3, 3)
BUFFER_BYTES = 7  # a bytearray subclass of 7 bytes: uint8, (7,)
# Zero elements: imported as CUDA memory without a driver, nothing is read.
CAI = {"shape": (0, 11), "typestr": "<f4", "data": (0, False), "version": 3}

#: protocol -> (what identifies it in the documented list, what DLPackArray then holds)
PROTOCOLS = {
    "dlpack": ("**DLPack**", ((6,), "int8")),
    "cuda_array_interface": ("``__cuda_array_interface__``", ((0, 11), "float32")),
    "array_struct": ("``__array_struct__``", ((3,), "float32")),
    "array_interface": ("``__array_interface__``", ((2, 2), "int16")),
    "arrow": ("The Arrow PyCapsule interface", ((5,), "float64")),
    "buffer": ("PEP 3118 buffer protocol", ((BUFFER_BYTES,), "uint8")),
    "array_method": ("``__array__()``", ((3, 3), "uint16")),
}


def documented_order() -> list[str]:
    """The protocols in the order of the numbered list on docs/protocols.rst."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(".. _import-precedence:") :]
    section = section[: section.index("\n11. ")]
    items = re.split(r"\n(?=\d+\. )", section)[1:]
    where = {}
    for name, (marker, _) in PROTOCOLS.items():
        hits = [i for i, item in enumerate(items) if marker in item.split("\n")[0]]
        assert hits, f"the precedence list no longer names {marker}"
        where[name] = hits[0]
    return sorted(PROTOCOLS, key=where.__getitem__)


ORDER = documented_order()


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    return DLPACK_SRC.__dlpack__(stream=stream, max_version=max_version)


def _dlpack_device(self):
    return (1, 0)


def _arrow_c_array(self, requested_schema=None):
    return DLPackArray(ARROW_SRC).__arrow_c_array__(requested_schema)


def _array(self, dtype=None, copy=None):
    return ARRAY_SRC


def make(protocols: tuple[str, ...]):
    """An object offering exactly ``protocols``, each with its own data."""
    namespace: dict = {}
    if "dlpack" in protocols:
        namespace["__dlpack__"] = _dlpack
        namespace["__dlpack_device__"] = _dlpack_device
    if "arrow" in protocols:
        namespace["__arrow_c_array__"] = _arrow_c_array
    if "array_method" in protocols:
        namespace["__array__"] = _array
    base = bytearray if "buffer" in protocols else object
    cls = type("Offers_" + "_".join(protocols), (base,), namespace)
    obj = cls(BUFFER_BYTES) if base is bytearray else cls()
    # Instance attributes, as exporters set them (the import looks them up on the instance).
    if "cuda_array_interface" in protocols:
        obj.__cuda_array_interface__ = CAI
    if "array_struct" in protocols:
        obj.__array_struct__ = STRUCT_SRC.__array_struct__
    if "array_interface" in protocols:
        obj.__array_interface__ = IFACE_SRC.__array_interface__
    return obj


COMBINATIONS = [
    combo
    for n in range(1, len(PROTOCOLS) + 1)
    for combo in itertools.combinations(list(PROTOCOLS), n)
]


def test_documented_order_names_every_protocol_once():
    """The page lists DLPack, the CUDA and NumPy interfaces, Arrow, buffer, __array__ in turn."""
    assert ORDER == [
        "dlpack",
        "cuda_array_interface",
        "array_struct",
        "array_interface",
        "arrow",
        "buffer",
        "array_method",
    ]


@pytest.mark.parametrize("protocols", COMBINATIONS, ids=["+".join(c) for c in COMBINATIONS])
def test_the_documented_first_protocol_wins(protocols):
    """Of the protocols an object offers, DLPackArray reads the first in the documented order."""
    first = min(protocols, key=ORDER.index)
    a = DLPackArray(make(protocols))
    assert (a.shape, str(a.dtype)) == PROTOCOLS[first][1], (protocols, first)
    # Asking again (the route of a type may be remembered) reads the same protocol.
    b = DLPackArray(make(protocols))
    assert (b.shape, str(b.dtype)) == PROTOCOLS[first][1]


def test_pyarrow_tensor_arrays_are_read_through_arrow_before_dlpack():
    """A pyarrow tensor array is read as the Arrow definition says, not as its __dlpack__."""
    pa = require("pyarrow", "its tensor arrays are the documented exception to DLPack first")
    values = np.arange(120, dtype=np.int32)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(values), 60)
    tensor_type = pa.fixed_shape_tensor(pa.int32(), [3, 4, 5], permutation=[2, 0, 1])
    fst = pa.ExtensionArray.from_storage(tensor_type, storage)
    assert hasattr(type(fst), "__dlpack__")
    # The canonical extension: each cell row-major in the physical shape, logical dimension
    # i is physical dimension permutation[i].
    expected = values.reshape(2, 3, 4, 5).transpose(0, 3, 1, 2)
    got = np.asarray(DLPackArray(fst))
    assert got.shape == expected.shape and (got == expected).all()
