# cython: language_level=3
# A pure declaration (no module behind it): the type slot that holds an
# extension type's vectorcall constructor, which Cython's PyTypeObject does not
# declare.  DLPackArray installs its own constructor there (_array.pyx), DType
# removes Cython's (_common.pyx).
from cpython.object cimport PyObject

ctypedef PyObject* (*Vectorcall)(PyObject* callable, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) noexcept

cdef extern from "Python.h":
    ctypedef struct VectorcallType "PyTypeObject":
        Vectorcall tp_vectorcall
