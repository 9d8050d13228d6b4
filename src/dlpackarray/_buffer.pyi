# Stub for the Cython module dlpackarray._buffer (see tests/test_stubs.py).

class BufferOwner:
    """Holds an acquired PEP 3118 buffer (internal)."""
