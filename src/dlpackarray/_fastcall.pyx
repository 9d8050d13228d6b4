# cython: language_level=3, boundscheck=False, wraparound=False
"""Hand-written argument handling for the hottest method, ``DLPackArray.__dlpack__``.

Every exchange calls ``__dlpack__`` once with one to four keywords.  Cython's
generic keyword parser (new references for every default, a lookup table,
a cleanup loop) cost about as much as building the capsule itself, so the
method's C function is replaced at import by ``_dlpack_fastcall``: same
calling convention (METH_FASTCALL | METH_KEYWORDS), same docstring and text
signature, same errors, and the same ``export_capsule`` doing the work.
"""
import sys

from cpython.object cimport PyObject, PyTypeObject

from dlpackarray._internal cimport DLPackArray, check_ready
from dlpackarray._internal cimport export_capsule


cdef extern from "Python.h":
    # Just the fields used here; the function pointer is only assigned.
    ctypedef void* _CFunction "PyCFunction"
    ctypedef struct _MethodDef "PyMethodDef":
        const char* ml_name
        _CFunction ml_meth
        int ml_flags
        const char* ml_doc
    ctypedef struct _MethodDescr "PyMethodDescrObject":
        _MethodDef* d_method
    ctypedef struct _TypeDict "PyTypeObject":
        PyObject* tp_dict
    int METH_FASTCALL
    int METH_KEYWORDS
    object PyDescr_NewMethod(PyTypeObject* cls, _MethodDef* method)
    void PyType_Modified(PyTypeObject* cls)
    int PyDict_SetItem(PyObject* d, object key, object value) except -1
    Py_ssize_t _names_size "PyTuple_GET_SIZE"(PyObject* names)
    PyObject* _names_item "PyTuple_GET_ITEM"(PyObject* names, Py_ssize_t i)


# Keyword names arrive as the caller's interned constants, so a pointer
# comparison almost always decides; equality is the fallback for names built
# at run time.  Order: the parameters of __dlpack__.
cdef str _STREAM = sys.intern("stream")
cdef str _MAX_VERSION = sys.intern("max_version")
cdef str _DL_DEVICE = sys.intern("dl_device")
cdef str _COPY = sys.intern("copy")


cdef inline int _keyword_index(PyObject* name) except -2:
    """Index of ``name`` among __dlpack__'s keywords, -1 if it is none of them."""
    if name == <PyObject*>_MAX_VERSION:
        return 1
    if name == <PyObject*>_STREAM:
        return 0
    if name == <PyObject*>_DL_DEVICE:
        return 2
    if name == <PyObject*>_COPY:
        return 3
    key = <object>name
    if key == _MAX_VERSION:
        return 1
    if key == _STREAM:
        return 0
    if key == _DL_DEVICE:
        return 2
    if key == _COPY:
        return 3
    return -1


cdef object _dlpack_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                             PyObject* kwnames):
    """``DLPackArray.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)``.

    ``self`` is a DLPackArray: the method descriptor checks that before the
    call.  The keyword values follow the positional ones in ``args``; the
    interpreter never passes a name twice.
    """
    cdef PyObject* values[4]
    cdef Py_ssize_t i
    cdef int index
    if nargs != 0:
        raise TypeError(f"__dlpack__() takes exactly 0 positional arguments ({nargs} given)")
    values[0] = values[1] = values[2] = values[3] = <PyObject*>None
    if kwnames != NULL:
        for i in range(_names_size(kwnames)):
            index = _keyword_index(_names_item(kwnames, i))
            if index < 0:
                raise TypeError(
                    f"__dlpack__() got an unexpected keyword argument "
                    f"'{<object>_names_item(kwnames, i)}'")
            values[index] = args[i]
    check_ready(<DLPackArray>self)
    # Borrowed references: the caller keeps the arguments alive for the call.
    return export_capsule(&(<DLPackArray>self)._view, (<DLPackArray>self).owner,
                          <object>values[0], <object>values[1], <object>values[2],
                          <object>values[3])


# The method table entry of the replacement; it must live as long as the type.
cdef _MethodDef _DLPACK_METHOD


cdef int _install() except -1:
    """Points DLPackArray.__dlpack__ at _dlpack_fastcall, keeping Cython's
    name, flags and docstring (which holds the text signature).  Leaves
    Cython's method in place if it is not the expected fastcall method
    descriptor (another Cython configuration or Python implementation)."""
    global _DLPACK_METHOD
    descr = DLPackArray.__dict__["__dlpack__"]
    if type(descr) is not type(list.append):
        return 0
    cdef _MethodDef* original = (<_MethodDescr*><PyObject*>descr).d_method
    if original.ml_flags != (METH_FASTCALL | METH_KEYWORDS):
        return 0
    _DLPACK_METHOD = original[0]
    _DLPACK_METHOD.ml_meth = <_CFunction><void*>_dlpack_fastcall
    replacement = PyDescr_NewMethod(<PyTypeObject*>DLPackArray, &_DLPACK_METHOD)
    PyDict_SetItem((<_TypeDict*><PyObject*>DLPackArray).tp_dict, "__dlpack__", replacement)
    PyType_Modified(<PyTypeObject*>DLPackArray)
    return 0


_install()
