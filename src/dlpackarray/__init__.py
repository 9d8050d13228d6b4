"""dlpackarray: zero-copy exchange of any Python array-like object.

:class:`DLPackArray` wraps DLPack producers, DLPack capsules and PEP 3118
buffer exporters without copying and re-exports them through DLPack and the
buffer protocol.
"""

from __future__ import annotations

import os

from dlpackarray import _fast_entries
from dlpackarray._array import DLPackArray, from_dlpack

# The C API table (``import_dlpackarray()`` loads it as dlpackarray._C_API);
# importing _capi also gives DLPackArray its __dlpack_c_exchange_api__.
from dlpackarray._capi import _C_API as _C_API  # isort: skip
from dlpackarray._capi import C_API_VERSION  # isort: skip
from dlpackarray._common import DType
from dlpackarray._devices import DLDeviceType

# Every type slot and method-table patch of the package, once, before any
# array exists (_fast_entries.pyx says what each entry replaces).
_fast_entries.install()

__all__ = [
    "C_API_VERSION",
    "DLDeviceType",
    "DLPackArray",
    "DType",
    "DLPACK_VERSION",
    "MAX_NDIM",
    "from_dlpack",
    "get_include",
    "__version__",
]

__version__ = "0.1.0"

#: The DLPack ABI version produced and understood, as ``(major, minor)``.
DLPACK_VERSION = (1, 3)

#: Largest number of dimensions a DLPackArray can hold (NumPy 2's limit).
MAX_NDIM = 64


def get_include() -> str:
    """Return the folder holding dlpackarray's C header.

    The public C API header is ``<folder>/dlpackarray/dlpackarray.h`` (valid C
    and C++), the only header shipped; ``.pxd`` files for ``cimport
    dlpackarray`` ship beside the Python modules.  ``python -m dlpackarray
    --include`` prints the same folder, ``--cmake-dir`` the folder of
    ``dlpackarrayConfig.cmake`` (docs/c_api.md, "Build systems").
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
