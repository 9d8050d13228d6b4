"""dlpackarray: zero-copy exchange of any Python array-like object.

:class:`DLPackArray` wraps DLPack producers, DLPack capsules and PEP 3118
buffer exporters without copying and re-exports them through DLPack and the
buffer protocol.
"""

from __future__ import annotations

import os

from dlpackarray import _fastcall  # noqa: F401  (installs DLPackArray.__dlpack__'s fast path)
from dlpackarray._array import DLPackArray, from_dlpack
from dlpackarray._common import DType
from dlpackarray._devices import DLDeviceType

__all__ = [
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
    """Return the folder holding dlpackarray's C/C++ headers.

    The headers live in ``<folder>/dlpackarray/*.hpp``; ``.pxd`` files for
    ``cimport dlpackarray`` ship beside the Python modules.
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
