# Stub for the Cython module dlpackarray._pickle (see tests/packaging/test_stubs.py).
from typing import Any

from dlpackarray._array import DLPackArray

FORMAT_VERSION: int

def reduce_array(a: DLPackArray, protocol: int) -> tuple[Any, tuple[Any, ...]]: ...
def rebuild(
    version: int,
    data: Any,
    dtype: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int,
    readonly: bool,
    device: tuple[int, int],
) -> DLPackArray: ...
def rebuild_as(cls: type[DLPackArray], *args: Any) -> DLPackArray: ...
def copy_array(a: DLPackArray, memo: dict[int, Any] | None = None) -> DLPackArray: ...
def byte_extent(a: DLPackArray) -> int: ...
