# cython: language_level=3
# Imports ``obj`` into ``array``, a DLPackArray never initialised, following the
# documented precedence; it ends ready, or failed for good (_import.pyx).
cdef int fill(object array, object obj, object copy, object device, bint dlpack_only,
              object stream) except -1
