"""Every DLPack dtype a capsule can carry, through validate().

validate() takes the dtype's verdict and item size from one table lookup
(supported_itemsize).  Over a grid of codes, widths and lanes this pins the
verdict against the supported-dtype list (every name on it, through
``DType(name)``), the item size the extent is computed with, and each
refusal's message (lanes, sub-byte, unknown) as check_dtype_supported words it.
"""

from __future__ import annotations

import itertools
import re

import dlpack_ctypes as dc
import pytest

from dlpackarray import DLPackArray, DType

TAIL = "one lane, whole bytes, native byte order)"
# DLPack's sub-byte float codes (float6_e2m3fn, float6_e3m2fn, float4_e2m1fn).
SUB_BYTE_CODES = {15, 16, 17}


def _import(code, bits, lanes):
    p = dc.Producer(None, shape=(3,), strides=(2,), dtype=(code, bits, lanes), data=0x1000)
    try:
        return DLPackArray(p.capsule()), p
    except BufferError as e:
        assert p.deleter_calls == 1
        return e, p


def _supported():
    e, _ = _import(dc.KDL_FLOAT, 24, 1)
    names = re.search(r"supported dtypes are (.*) \(" + re.escape(TAIL), str(e))[1]
    out = {}
    for name in names.split(", "):
        d = DType(name)
        out[(d.code, d.bits)] = d
    return out


SUPPORTED = _supported()
CODES = range(0, 20)
BITS = [0, 1, 4, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 255]
LANES = [0, 1, 2, 4]


@pytest.mark.parametrize("code", CODES)
def test_every_dtype_gets_its_verdict_and_item_size(code):
    for bits, lanes in itertools.product(BITS, LANES):
        result, _ = _import(code, bits, lanes)
        spelled = f"DLDataType(code={code}, bits={bits}, lanes={lanes})"
        if lanes == 1 and (code, bits) in SUPPORTED:
            assert isinstance(result, DLPackArray), spelled
            assert result.dtype is SUPPORTED[(code, bits)]
            assert result.itemsize == bits // 8 and result.nbytes == 3 * (bits // 8)
            continue
        assert isinstance(result, BufferError), spelled
        text = str(result)
        assert text.endswith(TAIL)
        if lanes != 1:
            assert text.startswith(f"dtype {spelled} has lanes != 1; vector dtypes cannot be")
        elif code in SUB_BYTE_CODES or bits % 8:
            assert text.startswith(f"dtype {spelled} is a sub-byte type; packed sub-byte")
        else:
            assert text.startswith(f"unsupported dtype {spelled}; supported dtypes are ")
