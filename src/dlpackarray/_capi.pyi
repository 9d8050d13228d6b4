# Stub for the Cython module dlpackarray._capi (see tests/packaging/test_stubs.py).
# The C API table and the exchange API are C-level; these are their handles.
from typing_extensions import CapsuleType

#: The C API table (``DLPackArray_CAPI`` in dlpackarray.h), a capsule named
#: ``"dlpackarray._C_API"``.
_C_API: CapsuleType
#: ``(major, minor)`` of the C API table.
C_API_VERSION: tuple[int, int]
