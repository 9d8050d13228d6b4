"""The ``arrow.fixed_shape_tensor`` parameters as the importer reads them from a
schema's metadata: well-formed variants give the right shape and strides,
malformed ones a ValueError naming the problem, and unknown extensions a
TypeError naming the extension.

The schemas are pyarrow fields whose metadata is written by hand, so the
JSON can be anything; the storage is a real fixed-size list array.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require

pa = require("pyarrow", "these tests exchange data with it")


from dlpackarray import DLPackArray  # noqa: E402


class _FieldAndStorage:
    """An Arrow producer whose schema (and its metadata) is a hand-made field."""

    def __init__(self, field, storage):
        self.field = field
        self.storage = storage

    def __arrow_c_array__(self, requested_schema=None):
        _, array = self.storage.__arrow_c_array__()
        return self.field.__arrow_c_schema__(), array


def _tensor(metadata: bytes, list_size: int = 4, rows: int = 3, name=b"arrow.fixed_shape_tensor"):
    values = pa.array(np.arange(rows * list_size, dtype=np.float32))
    storage = pa.FixedSizeListArray.from_arrays(values, list_size)
    field = pa.field(
        "t",
        storage.type,
        metadata={b"ARROW:extension:name": name, b"ARROW:extension:metadata": metadata},
    )
    return _FieldAndStorage(field, storage), values


@pytest.mark.parametrize(
    ("metadata", "shape", "strides"),
    [
        (b'{"shape":[2,2]}', (3, 2, 2), (4, 2, 1)),
        (b'{"shape":[2,2],"permutation":[1,0]}', (3, 2, 2), (4, 1, 2)),
        (b'{"shape":[4],"permutation":[]}', (3, 4), (4, 1)),
        (b' { "dim_names" : ["a", "b"] , "shape" : [ 2 , 2 ] } ', (3, 2, 2), (4, 2, 1)),
        (b'{"extra":{"nested":[1,{"x":null}],"flag":true},"shape":[2,2]}', (3, 2, 2), (4, 2, 1)),
        # An escaped quote inside another key must not end the key early.
        (b'{"sh\\"ape":[9],"shape":[2,2]}', (3, 2, 2), (4, 2, 1)),
    ],
)
def test_wellformed_parameters_give_shape_and_strides(metadata, shape, strides):
    src, values = _tensor(metadata)
    d = DLPackArray(src)
    assert d.shape == shape
    assert d.strides == strides
    expected = np.lib.stride_tricks.as_strided(
        values.to_numpy(), shape, tuple(s * 4 for s in strides)
    )
    np.testing.assert_array_equal(np.asarray(d), expected)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (b"{}", 'no "shape"'),
        (b"", "unexpected end"),
        (b'{"shape":[2,2]} x', "trailing characters"),
        (b'{"shape":[2,2]', "unexpected end"),
        (b'{"shape":[2,-2]}', 'negative dimension in "shape"'),
        (b'{"shape":[2,2.5]}', "expected an integer"),
        (b'{"shape":[2,99999999999999999999]}', "overflows int64"),
        (b'{"shape":[2,2],"permutation":[0,0]}', "is not a permutation"),
        (b'{"shape":[2,2],"permutation":[0,2]}', "is not a permutation"),
        (b'{"shape":[2,2],"permutation":[0]}', "differ in length"),
        (b'{"shape":[3,2]}', "holds 6 elements but its storage lists hold 4"),
        (b'{"shape" [2,2]}', "expected ':'"),
        (b'{"shape":[2,2],"x":"open}', "unterminated string"),
        (b'{"a":' + b"[" * 80 + b"]" * 80 + b',"shape":[4]}', "nested too deeply"),
    ],
)
def test_malformed_parameters_raise_value_error_naming_the_problem(metadata, message):
    src, _ = _tensor(metadata)
    with pytest.raises(ValueError, match="arrow.fixed_shape_tensor") as info:
        DLPackArray(src)
    assert message in str(info.value)


def test_cell_dimension_limit_is_the_tensor_limit_minus_the_row_dimension():
    ok = b'{"shape":[' + b",".join([b"1"] * 63) + b"]}"
    d = DLPackArray(_tensor(ok, list_size=1)[0])
    assert d.ndim == 64
    too_many = b'{"shape":[' + b",".join([b"1"] * 64) + b"]}"
    with pytest.raises(ValueError, match="has 64 cell dimensions; at most 63"):
        DLPackArray(_tensor(too_many, list_size=1)[0])


def test_unknown_extension_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="Arrow extension type 'my.tensor'"):
        DLPackArray(_tensor(b'{"shape":[4]}', name=b"my.tensor")[0])


def test_empty_extension_name_is_refused_not_ignored():
    with pytest.raises(TypeError, match="Arrow extension type ''"):
        DLPackArray(_tensor(b'{"shape":[4]}', name=b"")[0])
