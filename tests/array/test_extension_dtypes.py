"""NumPy arrays of ml_dtypes extension types (bfloat16, float8): NumPy's own
__dlpack__ refuses them, so DLPackArray reads them through the array
interface and takes the dtype from its name — still zero-copy."""

import numpy as np
import pytest
from conftest import require

from dlpackarray import DLPackArray

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes provides bfloat16/float8 for NumPy")
torch = require("torch", "these tests exchange data with it")


@pytest.mark.parametrize(
    ("name", "torch_dtype"),
    [
        ("bfloat16", torch.bfloat16),
        ("float8_e4m3fn", torch.float8_e4m3fn),
        ("float8_e5m2", torch.float8_e5m2),
    ],
)
def test_numpy_extension_dtype_reaches_torch_zero_copy(name, torch_dtype):
    src = np.arange(12, dtype=np.float32).reshape(3, 4).astype(getattr(ml_dtypes, name))
    with pytest.raises(BufferError):
        src.__dlpack__()  # the gap this path closes
    a = DLPackArray(src)
    assert a.dtype.name == name
    assert a.shape == (3, 4)
    assert a.data_ptr + a.byte_offset == src.__array_interface__["data"][0]
    t = torch.from_dlpack(a)
    assert t.dtype == torch_dtype
    assert t.view(torch.uint8).numpy().tobytes() == src.tobytes()
    t[0, 0] = 5.0
    assert float(src[0, 0]) == 5.0


def test_numpy_extension_dtype_readonly_and_strided():
    src = np.arange(20, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(4, 5)[::2, ::-1]
    src.flags.writeable = False
    a = DLPackArray(src)
    assert a.readonly
    assert a.strides == (10, -1)
    back = np.asarray(a)
    assert back.dtype == src.dtype
    np.testing.assert_array_equal(back.view(np.uint16), src.view(np.uint16))


def test_structured_void_dtype_still_refused():
    src = np.zeros(3, dtype=[("a", "<i4"), ("b", "<f4")])
    with pytest.raises((TypeError, BufferError)):
        DLPackArray(src)


def test_byte_swapped_extension_dtype_refused():
    src = np.zeros(4, dtype=np.dtype(ml_dtypes.bfloat16).newbyteorder())
    with pytest.raises(BufferError):
        DLPackArray(src)
