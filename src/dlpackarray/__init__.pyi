# Hand-written stub for the package; tests/packaging/test_stubs.py keeps it in sync with the
# runtime.
from typing_extensions import CapsuleType

from dlpackarray._array import DLPackArray as DLPackArray
from dlpackarray._array import from_dlpack as from_dlpack
from dlpackarray._common import DType as DType
from dlpackarray._devices import DLDeviceType as DLDeviceType

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

__version__: str
DLPACK_VERSION: tuple[int, int]
MAX_NDIM: int
#: ``(major, minor)`` of the C API table in ``dlpackarray.h``.
C_API_VERSION: tuple[int, int]
#: The C API table, loaded from C by ``import_dlpackarray()``.
_C_API: CapsuleType

def get_include() -> str: ...
