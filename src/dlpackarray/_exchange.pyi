# Stub for the Cython module dlpackarray._exchange (see tests/packaging/test_stubs.py).
# It exposes no Python-level names: the exchange-API consumer is cdef-only.
