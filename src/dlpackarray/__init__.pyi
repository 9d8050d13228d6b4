# Hand-written stub for the package; tests/test_stubs.py keeps it in sync with the runtime.
from dlpackarray._array import DLPackArray as DLPackArray
from dlpackarray._array import from_dlpack as from_dlpack
from dlpackarray._common import DType as DType
from dlpackarray._devices import DLDeviceType as DLDeviceType

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

__version__: str
DLPACK_VERSION: tuple[int, int]
MAX_NDIM: int

def get_include() -> str: ...
