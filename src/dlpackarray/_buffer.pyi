# Stub for the Cython module dlpackarray._buffer (see tests/packaging/test_stubs.py).
from typing_extensions import disjoint_base

@disjoint_base
class BufferOwner:
    """Holds an acquired PEP 3118 buffer (internal)."""
