# cython: language_level=3, boundscheck=False, wraparound=False
"""Every patch of a type slot or method table in the package, installed by
one call, ``install()`` (dlpackarray/__init__.py), before any array exists.

Each patched ``def`` or class names its entry here in a comment.  The
entries keep the calling convention, docstring, text signature and errors of
what they replace; they exist because the call itself is most of the work:

* ``DLPackArray.__dlpack__`` (every DLPack exchange calls it once, with one
  to four keywords): Cython's generic keyword parser cost about as much as
  building the capsule.  ``_dlpack_entry`` reads the keywords by position and
  builds the commonest request (``max_version`` only, no pending stream)
  directly: the very capsule ``export_capsule`` would make.
* ``__arrow_c_device_array__`` / ``__arrow_c_device_stream__`` take
  ``**kwargs`` (the PyCapsule interface's future keywords,
  https://arrow.apache.org/docs/format/CDataInterface/PyCapsuleInterface.html):
  their entries build a dictionary only when an unknown keyword is passed.
* ``DLPackArray(x)`` with one positional argument: the type's vectorcall
  constructor goes straight to the import (``_construct``).
* ``DType``: a cdef class cannot define ``__new__``, so its ``tp_new``
  returns the interned instance (``_dtype_new``).
"""
import sys

from cpython.object cimport PyObject, PyTypeObject, newfunc
from cpython.ref cimport Py_INCREF

from dlpackarray.core cimport kDLPackMajorVersion, kFlagReadOnly, new_versioned_capsule
from dlpackarray._internal cimport DLPackArray, check_ready, new_from_object
from dlpackarray._internal cimport export_arrow, export_capsule, is_versioned_request
from dlpackarray._internal cimport DType, dtype_object, parse_dtype


ctypedef PyObject* (*Vectorcall)(PyObject* callable, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) noexcept

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
    # The slots patched here, which Cython's PyTypeObject does not declare.
    ctypedef struct _TypeSlots "PyTypeObject":
        PyObject* tp_dict
        Vectorcall tp_vectorcall
        newfunc tp_new
    int METH_FASTCALL
    int METH_KEYWORDS
    object PyDescr_NewMethod(PyTypeObject* cls, _MethodDef* method)
    void PyType_Modified(PyTypeObject* cls)
    int PyDict_SetItem(PyObject* d, object key, object value) except -1
    Py_ssize_t PyVectorcall_NARGS(size_t nargsf)
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


cdef inline int _read_keywords(PyObject** args, PyObject* kwnames,
                               PyObject** values) except -1:
    """Stores the keyword values of a call in ``values`` (__dlpack__'s order)."""
    cdef Py_ssize_t i
    cdef int index
    for i in range(_names_size(kwnames)):
        index = _keyword_index(_names_item(kwnames, i))
        if index < 0:
            raise TypeError(
                f"__dlpack__() got an unexpected keyword argument "
                f"'{<object>_names_item(kwnames, i)}'")
        values[index] = args[i]
    return 0


cdef object _ONE = int(kDLPackMajorVersion)  # CPython keeps one object per small int


cdef inline bint _asks_current_major(PyObject* max_version) except -1:
    """Whether ``max_version`` asks for the versioned struct, as
    is_versioned_request answers.  The commonest request, ``(1, minor)`` with
    int items, is decided here by the major's identity (every small int 1 is
    one object); anything else gets the full check."""
    if (type(<object>max_version) is tuple and len(<tuple>max_version) == 2
            and (<tuple>max_version)[0] is _ONE
            and type((<tuple>max_version)[1]) is int):
        return True
    return is_versioned_request(<object>max_version)


cdef object _dlpack_entry(object self, PyObject** args, Py_ssize_t nargs,
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
            and _asks_current_major(values[1])):
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


cdef object _device_array_entry(object self, PyObject** args, Py_ssize_t nargs,
                                PyObject* kwnames):
    return _arrow_device_call(self, args, nargs, kwnames, False, "__arrow_c_device_array__")


cdef object _device_stream_entry(object self, PyObject** args, Py_ssize_t nargs,
                                 PyObject* kwnames):
    return _arrow_device_call(self, args, nargs, kwnames, True, "__arrow_c_device_stream__")


# The method table entries of the replacements; they must live as long as the type.
cdef _MethodDef _DLPACK_METHOD
cdef _MethodDef _DEVICE_ARRAY_METHOD
cdef _MethodDef _DEVICE_STREAM_METHOD


cdef int _replace_method(str name, _MethodDef* entry, void* function) except -1:
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
    PyDict_SetItem((<_TypeSlots*><PyObject*>DLPackArray).tp_dict, name, replacement)
    return 0


# -- DLPackArray(x) ------------------------------------------------------------
# The commonest call there is.  Cython's generated vectorcall constructor runs
# the generic keyword parser of __init__ (a name table, a new reference per
# default, a cleanup loop); this one goes straight to the import.  Everything
# else (keywords, other argument counts, subclasses, which get type.__call__
# anyway) takes the generated one, with its errors.
cdef Vectorcall _generated_constructor = NULL


cdef PyObject* _construct(PyObject* t, PyObject* const* args, size_t nargsf,
                          PyObject* kwnames) except NULL:
    if kwnames != NULL or PyVectorcall_NARGS(nargsf) != 1 or t != <PyObject*>DLPackArray:
        return _generated_constructor(t, args, nargsf, kwnames)
    a = new_from_object(<object>args[0], None, None)
    Py_INCREF(a)
    return <PyObject*>a


# -- DType(name) -----------------------------------------------------------------
cdef object _dtype_new(type cls, PyObject* args, PyObject* kwargs):
    """DType's tp_new: construction returns the interned instance instead of a
    fresh object.  DType is final, so cls is always DType."""
    cdef tuple positional = <tuple>args if args != NULL else ()
    cdef dict named = <dict>kwargs if kwargs != NULL else {}
    if len(positional) + len(named) != 1 or (named and "name" not in named):
        raise TypeError("DType() takes exactly one argument, name (the type)")
    return dtype_object(parse_dtype(positional[0] if positional else named["name"]))


cdef bint _installed = False


def install():
    """Installs every entry above (once; later calls do nothing)."""
    global _installed, _generated_constructor
    if _installed:
        return
    _installed = True
    _replace_method("__dlpack__", &_DLPACK_METHOD, <void*>_dlpack_entry)
    _replace_method("__arrow_c_device_array__", &_DEVICE_ARRAY_METHOD,
                    <void*>_device_array_entry)
    _replace_method("__arrow_c_device_stream__", &_DEVICE_STREAM_METHOD,
                    <void*>_device_stream_entry)
    cdef _TypeSlots* array_type = <_TypeSlots*><PyObject*>DLPackArray
    _generated_constructor = array_type.tp_vectorcall
    if _generated_constructor != NULL:
        # (Through void*: the slot's type cannot say "NULL means an exception".)
        array_type.tp_vectorcall = <Vectorcall><void*>_construct
    PyType_Modified(<PyTypeObject*>DLPackArray)
    cdef _TypeSlots* dtype_type = <_TypeSlots*><PyObject*>DType
    dtype_type.tp_new = <newfunc>_dtype_new
    # Cython gives final classes a vectorcall constructor that allocates
    # without tp_new; without it DType(...) goes through type.__call__ and
    # _dtype_new.
    dtype_type.tp_vectorcall = NULL
    PyType_Modified(<PyTypeObject*>DType)
