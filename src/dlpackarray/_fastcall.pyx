# cython: language_level=3, boundscheck=False, wraparound=False
"""Hand-written argument handling for the hottest methods: ``DLPackArray.__dlpack__``
and the Arrow device methods.

Every exchange calls ``__dlpack__`` once with one to four keywords.  Cython's
generic keyword parser (new references for every default, a lookup table,
a cleanup loop) cost about as much as building the capsule itself, so the
method's C function is replaced at import by ``_dlpack_fastcall``: same
calling convention (METH_FASTCALL | METH_KEYWORDS), same docstring and text
signature, same errors, and the same ``export_capsule`` doing the work --
except for the commonest request (``max_version`` only, a view with no
pending stream), which is built here directly: the very capsule
``export_capsule`` would make, without its keyword checks.

``__arrow_c_device_array__`` and ``__arrow_c_device_stream__`` take
``**kwargs`` (the PyCapsule interface's future keywords); Cython built and
freed a dictionary for them on every call, which is what pyarrow, polars and
every device-aware consumer make.  Their replacements build one only when an
unknown keyword is passed, then call the same ``export_arrow``.
"""
import sys

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

from dlpackarray.core cimport kFlagReadOnly, new_versioned_capsule
from dlpackarray._internal cimport DLPackArray, check_ready
from dlpackarray._internal cimport export_arrow, export_capsule, is_versioned_request


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


cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define DLA_FASTCALL_MEMO 0  /* no GIL orders the slots' writes and reads */
    #else
    #define DLA_FASTCALL_MEMO 1
    #endif
    """
    # Whether the slots below are ever filled (never without a GIL).
    bint DLA_FASTCALL_MEMO


# max_version tuples already found to ask for the versioned struct.  Callers
# nearly always pass one constant tuple (a code object's constant, NumPy's
# static one), so a pointer comparison decides their requests.  Each slot
# holds a reference to its tuple, so no address in a slot is ever reused by
# another object; a new tuple replaces the oldest (round robin) and the
# evicted one is released only after the slot points elsewhere.  Filling the
# slots once for good let the first four call sites of a process (tests,
# benchmarks, a library's import) keep NumPy's tuple out of them for ever.
# (A tuple of ints is immutable: the answer cannot change.)
cdef enum:
    _SEEN_SLOTS = 4
cdef PyObject* _versioned_seen[4]
cdef int _versioned_next = 0


cdef inline bint _asks_versioned(PyObject* max_version) except -1:
    """is_versioned_request(max_version), remembered for the first tuples seen."""
    cdef int i
    for i in range(_SEEN_SLOTS):
        if _versioned_seen[i] == max_version:
            return True
    if not is_versioned_request(<object>max_version):
        return False
    if not DLA_FASTCALL_MEMO:
        return True
    global _versioned_next
    cdef PyObject* evicted = _versioned_seen[_versioned_next]
    Py_INCREF(<object>max_version)
    _versioned_seen[_versioned_next] = max_version
    _versioned_next = (_versioned_next + 1) % _SEEN_SLOTS
    Py_XDECREF(evicted)
    return True


# Where each keyword of a kwnames tuple goes, for the last tuples seen: a
# call site passes one constant tuple (a code object's, NumPy's static one),
# which is then read without comparing names.  Held and replaced like the
# max_version slots above, for the same reasons (tuples are immutable).
cdef struct _KeywordLayout:
    PyObject* names
    signed char index[4]
cdef _KeywordLayout _layouts[4]
cdef int _layouts_next = 0


cdef inline int _read_keywords(PyObject** args, PyObject* kwnames,
                               PyObject** values) except -1:
    """Stores the keyword values of a call in ``values`` (__dlpack__'s order)."""
    cdef Py_ssize_t i, n = _names_size(kwnames)
    cdef int slot, index
    cdef signed char found[4]
    for slot in range(_SEEN_SLOTS):
        if _layouts[slot].names == kwnames:
            for i in range(n):
                values[_layouts[slot].index[i]] = args[i]
            return 0
    for i in range(n):
        index = _keyword_index(_names_item(kwnames, i))
        if index < 0:
            raise TypeError(
                f"__dlpack__() got an unexpected keyword argument "
                f"'{<object>_names_item(kwnames, i)}'")
        values[index] = args[i]
        if i < 4:
            found[i] = <signed char>index
    if n > 4 or not DLA_FASTCALL_MEMO:
        return 0  # (more than 4: a name passed twice, by C code)
    global _layouts_next
    slot = _layouts_next
    cdef PyObject* evicted = _layouts[slot].names
    for i in range(n):
        _layouts[slot].index[i] = found[i]
    Py_INCREF(<object>kwnames)
    _layouts[slot].names = kwnames
    _layouts_next = (_layouts_next + 1) % _SEEN_SLOTS
    Py_XDECREF(evicted)
    return 0


cdef object _dlpack_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                             PyObject* kwnames):
    """``DLPackArray.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)``.

    ``self`` is a DLPackArray: the method descriptor checks that before the
    call.  The keyword values follow the positional ones in ``args``; the
    interpreter never passes a name twice.
    """
    cdef PyObject* values[4]
    if nargs != 0:
        raise TypeError(f"__dlpack__() takes exactly 0 positional arguments ({nargs} given)")
    values[0] = values[1] = values[2] = values[3] = <PyObject*>None
    if kwnames != NULL:
        _read_keywords(args, kwnames, values)
    check_ready(<DLPackArray>self)
    cdef PyObject* none = <PyObject*>None
    # export_capsule's own first check is max_version's, so deciding it first
    # raises the same error for a malformed one.
    if (values[0] == none and values[2] == none and values[3] == none
            and values[1] != none and (<DLPackArray>self)._view.ready_stream == NULL
            and _asks_versioned(values[1])):
        # export_capsule's plain request: no stream to order, no device or
        # copy to apply, so the versioned capsule (READ_ONLY flag as the view).
        return new_versioned_capsule(
            (<DLPackArray>self)._view,
            kFlagReadOnly if (<DLPackArray>self)._view.readonly else 0,
            <PyObject*>(<DLPackArray>self).owner)
    # Borrowed references: the caller keeps the arguments alive for the call.
    return export_capsule(&(<DLPackArray>self)._view, (<DLPackArray>self).owner,
                          <object>values[0], <object>values[1], <object>values[2],
                          <object>values[3])


cdef str _REQUESTED_SCHEMA = sys.intern("requested_schema")


cdef object _arrow_device_call(object self, PyObject** args, Py_ssize_t nargs,
                               PyObject* kwnames, bint stream, str name):
    """``(requested_schema=None, *, copy=None, **kwargs)`` read without a
    dictionary unless a keyword other than those two is passed."""
    cdef Py_ssize_t i
    cdef PyObject* schema = <PyObject*>None
    cdef PyObject* copy = <PyObject*>None
    cdef dict extra = None
    if nargs > 1:
        raise TypeError(f"{name}() takes at most 1 positional argument ({nargs} given)")
    if nargs == 1:
        schema = args[0]
    if kwnames != NULL:
        for i in range(_names_size(kwnames)):
            key = <object>_names_item(kwnames, i)
            if key is _REQUESTED_SCHEMA or key == _REQUESTED_SCHEMA:
                if nargs == 1:
                    raise TypeError(f"{name}() got multiple values for keyword argument "
                                    "'requested_schema'")
                schema = args[nargs + i]
            elif key is _COPY or key == _COPY:
                copy = args[nargs + i]
            else:
                if extra is None:
                    extra = {}
                extra[key] = <object>args[nargs + i]
    check_ready(<DLPackArray>self)
    return export_arrow(&(<DLPackArray>self)._view, (<DLPackArray>self).owner, <object>schema,
                        <object>copy, True, stream, extra)


cdef object _device_array_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                                   PyObject* kwnames):
    return _arrow_device_call(self, args, nargs, kwnames, False, "__arrow_c_device_array__")


cdef object _device_stream_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                                    PyObject* kwnames):
    return _arrow_device_call(self, args, nargs, kwnames, True, "__arrow_c_device_stream__")


# The method table entries of the replacements; they must live as long as the type.
cdef _MethodDef _DLPACK_METHOD
cdef _MethodDef _DEVICE_ARRAY_METHOD
cdef _MethodDef _DEVICE_STREAM_METHOD


cdef int _install(str name, _MethodDef* entry, void* function) except -1:
    """Points DLPackArray.<name> at ``function``, keeping Cython's name, flags
    and docstring (which holds the text signature).  Leaves Cython's method
    in place if it is not the expected fastcall method descriptor (another
    Cython configuration or Python implementation)."""
    descr = DLPackArray.__dict__[name]
    if type(descr) is not type(list.append):
        return 0
    cdef _MethodDef* original = (<_MethodDescr*><PyObject*>descr).d_method
    if original.ml_flags != (METH_FASTCALL | METH_KEYWORDS):
        return 0
    entry[0] = original[0]
    entry.ml_meth = <_CFunction>function
    replacement = PyDescr_NewMethod(<PyTypeObject*>DLPackArray, entry)
    PyDict_SetItem((<_TypeDict*><PyObject*>DLPackArray).tp_dict, name, replacement)
    PyType_Modified(<PyTypeObject*>DLPackArray)
    return 0


_install("__dlpack__", &_DLPACK_METHOD, <void*>_dlpack_fastcall)
_install("__arrow_c_device_array__", &_DEVICE_ARRAY_METHOD, <void*>_device_array_fastcall)
_install("__arrow_c_device_stream__", &_DEVICE_STREAM_METHOD, <void*>_device_stream_fastcall)
