# cython: language_level=3
# A pure declaration (no module behind it): the buffer layout memo that
# DLPackArray holds (_array.pxd) and the buffer export fills (_buffer.pyx).
# It lives apart from _buffer.pxd so that _array.pxd need not cimport a module
# with an implementation (the one internal boundary, tests/test_module_boundary.py).
# What a buffer export of an immutable view needs that does not depend on
# the request: measured on the first export, read by every later one.
cdef struct BufferLayout:
    # 0 until measured: what a zeroed object (tp_alloc, a freelist) holds.
    bint known
    bint c_contiguous
    bint f_contiguous
    const char* format  # PEP 3118 code, NULL if the dtype has none
    Py_ssize_t itemsize
    Py_ssize_t len  # -1: more than int64 bytes (the export raises OverflowError)
