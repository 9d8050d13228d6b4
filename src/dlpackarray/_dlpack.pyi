# Stub for the Cython module dlpackarray._dlpack (see tests/test_stubs.py).

class ManagedOwner:
    """Owns a consumed DLPack managed tensor (internal)."""

    @property
    def copied(self) -> bool: ...
