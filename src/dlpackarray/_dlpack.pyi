# Stub for the Cython module dlpackarray._dlpack (see tests/packaging/test_stubs.py).
# It exposes no Python-level names: capsule import/export is cdef-only.
