# cython: language_level=3, boundscheck=False, wraparound=False
"""NumPy's array interface family: ``__array_interface__`` (version 3),
``__array_struct__`` (PyArrayInterface capsules) and ``__array__``.

Import turns them into a TensorView plus an owner; export describes a view
through them.  NumPy itself is optional: only ``export_numpy`` imports it.
"""
import sys

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyObject_CheckBuffer
from cpython.object cimport PyObject
from cpython.pycapsule cimport (
    PyCapsule_CheckExact, PyCapsule_GetContext, PyCapsule_GetName, PyCapsule_GetPointer,
    PyCapsule_New, PyCapsule_SetContext,
)
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.string cimport strlen
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libcpp.string cimport string

from dlpackarray.abi cimport DLDataType, kDLCPU, kDLUInt
from dlpackarray.core cimport (
    TensorView, byte_stride, dtype_equal, dtype_from_typestr, dtype_itemsize, dtype_name,
    fold_byte_offset, is_c_contiguous, kMaxNdim, pep3118_from_dtype, require_host_memory,
    set_c_strides, set_strides_from_bytes, supported_dtypes_text, typestr_from_dtype, validate,
    validate_within,
)
from dlpackarray._internal cimport BufferOwner, acquire_buffer
from dlpackarray._internal cimport parse_copy, parse_dtype
from dlpackarray._internal cimport synchronize_for_host_read
from dlpackarray._internal cimport as_int64

cdef object _numpy = None


cdef str _src(object obj, str attr):
    return f"{attr} of a '{type(obj).__name__}' object"


cdef str _where(object ctx):
    """Error-message prefix: ``ctx`` is a ready string or the object whose
    ``__array_interface__`` is being read (formatted only when an error is
    raised, keeping the import path free of string work)."""
    return ctx if type(ctx) is str else _src(ctx, "__array_interface__")


cdef str _supported():
    return supported_dtypes_text().decode()


# -- shared field parsers ----------------------------------------------------

cdef inline int64_t _int_field(object item, object ctx, str field, Py_ssize_t i) except? -1:
    """A Python int entry of shape/strides as int64 (OverflowError naming it)."""
    try:
        return <int64_t>item
    except OverflowError:
        raise OverflowError(f"{_where(ctx)}: {field}[{i}] = {item} does not fit in int64") from None


cdef int _parse_shape(object shape, object ctx, TensorView* out) except -1:
    cdef Py_ssize_t n, i
    if type(shape) is not tuple:
        raise TypeError(f"{_where(ctx)}: 'shape' must be a tuple of ints, "
                        f"got {type(shape).__name__}")
    n = len(<tuple>shape)
    if n > kMaxNdim:
        raise ValueError(f"{_where(ctx)}: 'shape' has {n} dimensions; at most {kMaxNdim} are "
                         "supported")
    out.set_ndim(<int>n)
    for i in range(n):
        item = (<tuple>shape)[i]
        out.shape[i] = as_int64(item, f"{_where(ctx)}: shape[{i}]") if type(item) is not int \
            else _int_field(item, ctx, "shape", i)
    return 0


cdef int _parse_byte_strides(object strides, object ctx, const char* src,
                             TensorView* out) except -1:
    """None -> C-contiguous; otherwise a tuple of ``ndim`` strides in bytes."""
    cdef int64_t byte_strides[64]
    cdef Py_ssize_t i
    if strides is None:
        set_c_strides(out[0])
        return 0
    if type(strides) is not tuple:
        raise TypeError(f"{_where(ctx)}: 'strides' must be None or a tuple of ints, "
                        f"got {type(strides).__name__}")
    if len(<tuple>strides) != out.ndim:
        raise ValueError(f"{_where(ctx)}: 'strides' has {len(<tuple>strides)} entries but "
                         f"'shape' has {out.ndim}")
    for i in range(out.ndim):
        item = (<tuple>strides)[i]
        byte_strides[i] = as_int64(item, f"{_where(ctx)}: strides[{i}]") if type(item) is not int \
            else _int_field(item, ctx, "strides", i)
    set_strides_from_bytes(out[0], byte_strides, src)
    return 0


# Parsed typestrs (only valid, short ones: a few dozen entries at most): the
# import hot path then costs one dict lookup instead of a parse.
cdef dict _typestr_cache = {}


cdef DLDataType _typestr_dtype(object typestr, object ctx) except *:
    cdef Py_ssize_t n
    cdef const char* text
    cdef DLDataType dt
    cached = _typestr_cache.get(typestr) if type(typestr) is str else None
    if cached is not None:
        dt.code, dt.bits, dt.lanes = <tuple>cached
        return dt
    if not isinstance(typestr, str):
        raise TypeError(f"{_where(ctx)}: 'typestr' must be a str, got {type(typestr).__name__}")
    # ASCII first: a lone surrogate has no UTF-8 form to ask for.  A NUL
    # would end the C string early.
    if not (<str>typestr).isascii():
        raise TypeError(f"{_where(ctx)}: invalid typestr {typestr!r}")
    text = PyUnicode_AsUTF8AndSize(typestr, &n)
    if <size_t>n != strlen(text):
        raise TypeError(f"{_where(ctx)}: invalid typestr {typestr!r}")
    dt = dtype_from_typestr(text)
    if type(typestr) is str and n <= 4:  # canonical spellings only: the cache stays small
        _typestr_cache[typestr] = (dt.code, dt.bits, dt.lanes)
    return dt


cdef DLDataType _resolve_dtype(object typestr, object descr, object ctx) except *:
    """The element type from 'typestr', cross-checked against 'descr'.

    DLPack has no structured types, so 'descr' may only restate the element
    type as one unnamed field (NumPy's default ``[('', typestr)]``); with a
    void typestr ('|V4') that field supplies the type.
    """
    cdef DLDataType from_descr
    if descr is None:
        return _typestr_dtype(typestr, ctx)
    if type(descr) is not list:
        raise TypeError(f"{_where(ctx)}: 'descr' must be a list of (name, format) tuples, "
                        f"got {type(descr).__name__}")
    if len(<list>descr) == 0:
        raise TypeError(f"{_where(ctx)}: 'descr' has 0 fields; it must describe the element type")
    if len(<list>descr) != 1:
        raise BufferError(f"{_where(ctx)}: 'descr' describes a structured dtype with "
                          f"{len(<list>descr)} fields; DLPack has no structured types; "
                          f"{_supported()}")
    field = (<list>descr)[0]
    if type(field) is not tuple or len(<tuple>field) not in (2, 3):
        raise TypeError(f"{_where(ctx)}: 'descr' entries must be (name, format[, shape]) tuples, "
                        f"got {field!r}")
    name, fmt = (<tuple>field)[0], (<tuple>field)[1]
    if len(<tuple>field) == 2 and fmt is typestr and type(name) is str and not name:
        return _typestr_dtype(typestr, ctx)  # NumPy's default [('', typestr)]
    if name != "":
        raise BufferError(f"{_where(ctx)}: 'descr' has a named field {name!r}: a structured "
                          f"dtype, which DLPack cannot describe; {_supported()}")
    if len(<tuple>field) == 3:
        raise BufferError(f"{_where(ctx)}: 'descr' field has a sub-array shape "
                          f"{(<tuple>field)[2]!r}: a structured dtype, which DLPack cannot "
                          f"describe; {_supported()}")
    if not isinstance(fmt, str):
        if isinstance(fmt, list):
            raise BufferError(f"{_where(ctx)}: 'descr' field holds a nested structured dtype, "
                              f"which DLPack cannot describe; {_supported()}")
        raise TypeError(f"{_where(ctx)}: 'descr' field format must be a typestr, got {fmt!r}")
    from_descr = _typestr_dtype(fmt, ctx)
    if isinstance(typestr, str) and len(<str>typestr) >= 2 and (<str>typestr)[1] == "V":
        if (<str>typestr)[2:] != str(dtype_itemsize(from_descr)):
            raise TypeError(f"{_where(ctx)}: typestr {typestr!r} and descr format {fmt!r} "
                            "disagree on the item size")
        return from_descr
    cdef DLDataType dt = _typestr_dtype(typestr, ctx)
    if not dtype_equal(dt, from_descr):
        raise TypeError(f"{_where(ctx)}: typestr {typestr!r} and descr format {fmt!r} disagree")
    return dt


cdef BufferOwner _contiguous_buffer(object obj, object ctx):
    """The raw bytes of a contiguous buffer exporter; the owner holds them."""
    try:
        # Without PyBUF_WRITABLE the exporter reports writability in readonly.
        return acquire_buffer(obj, PyBUF_ANY_CONTIGUOUS)
    except (BufferError, ValueError) as e:  # NumPy refuses with ValueError
        raise BufferError(f"{_where(ctx)}: needs a contiguous buffer from the "
                          f"'{type(obj).__name__}' object: {e}") from None


# -- import -----------------------------------------------------------------

cdef object view_from_array_interface(object obj, object iface, TensorView* out):
    cdef BufferOwner buf
    cdef int64_t offset = 0
    cdef uint64_t ptr
    # Error messages name the source object; they are formatted only when
    # raised (see _where), keeping the hot path free of string work.
    ctx = obj
    if not isinstance(iface, dict):
        raise TypeError(f"{_where(ctx)} must be a dict, got {type(iface).__name__}")
    cdef dict d = <dict>iface
    version = d.get("version")
    if type(version) is not int:
        if version is None:
            raise ValueError(f"{_where(ctx)} lacks the required key 'version'")
        raise TypeError(f"{_where(ctx)}: 'version' must be an int, got {type(version).__name__}")
    if version != 3:
        raise ValueError(f"{_where(ctx)} has version {version}; only version 3 is understood")
    mask = d.get("mask")
    if mask is not None:
        raise ValueError(f"{_where(ctx)} has a 'mask'; masked arrays cannot be exchanged "
                         "through DLPack")
    typestr = d.get("typestr")
    shape = d.get("shape")
    if typestr is None or shape is None:
        raise ValueError(f"{_where(ctx)} lacks the required key "
                         f"'{'typestr' if typestr is None else 'shape'}'")
    out.dtype = _resolve_dtype(typestr, d.get("descr"), ctx)
    _parse_shape(shape, ctx, out)
    _parse_byte_strides(d.get("strides"), ctx, b"__array_interface__", out)
    off = d.get("offset", 0)
    if off is not None:
        offset = <int64_t>off if type(off) is int else as_int64(off, f"{_where(ctx)}: 'offset'")
        if offset < 0:
            raise ValueError(f"{_where(ctx)}: 'offset' is {offset}; it must be >= 0")
    out.device.device_type = kDLCPU
    out.device.device_id = 0
    out.ready_stream = NULL
    data = d.get("data")
    if type(data) is tuple:
        if len(<tuple>data) != 2:
            raise TypeError(f"{_where(ctx)}: 'data' must be a (pointer, readonly) pair, "
                            f"got {data!r}")
        p, ro = (<tuple>data)[0], (<tuple>data)[1]
        if type(p) is not int and (isinstance(p, bool) or not isinstance(p, int)):
            raise TypeError(f"{_where(ctx)}: the data pointer must be an int, "
                            f"got {type(p).__name__}")
        try:
            ptr = <uintptr_t>p
        except OverflowError:
            raise ValueError(f"{_where(ctx)}: data pointer {p} is not a valid address") from None
        if ro is not True and ro is not False and not isinstance(ro, int):
            raise TypeError(f"{_where(ctx)}: the read-only flag must be a bool, "
                            f"got {type(ro).__name__}")
        # Spec: with an explicit pointer 'offset' is ignored; the pointer is
        # the first element.  The exporter keeps the memory alive, so the
        # owner is the exporter itself.
        out.data = <void*><uintptr_t>ptr
        out.byte_offset = 0
        out.readonly = ro is True or (ro is not False and bool(ro))
        validate(out[0])
        return obj
    if data is None:
        buf = _contiguous_buffer(obj, ctx) if PyObject_CheckBuffer(obj) else None
        if buf is None:
            raise TypeError(f"{_where(ctx)} has no 'data' and the object exposes no buffer to read "
                            "the data from")
    elif PyObject_CheckBuffer(data):
        buf = _contiguous_buffer(data, ctx)
    else:
        raise TypeError(f"{_where(ctx)}: 'data' must be None, a (pointer, readonly) tuple or a "
                        f"buffer object, got {type(data).__name__}")
    out.data = buf.buf.buf
    out.byte_offset = <uint64_t>offset
    out.readonly = buf.buf.readonly != 0
    # The buffer's length is known: the interface may not reach outside it.
    validate_within(out[0], buf.buf.buf, buf.buf.len)
    fold_byte_offset(out[0])
    return buf


cdef int _check_struct_descr(object obj, object descr, const TensorView* out) except -1:
    # Apart from view_from_array_struct_capsule, which would otherwise
    # construct and destroy the C++ string of the typestr on every import
    # (Cython declares it at the top of the function it is in).
    ts = typestr_from_dtype(out.dtype).decode()
    if not dtype_equal(_resolve_dtype(ts, descr, _src(obj, "__array_struct__")), out.dtype):
        raise TypeError(f"{_src(obj, '__array_struct__')}: descr disagrees with typekind")
    return 0


cdef ArrayInterfaceStruct* _struct_of(object obj, object capsule) except NULL:
    cdef const char* name
    if not PyCapsule_CheckExact(capsule):
        raise TypeError(f"{_src(obj, '__array_struct__')} must be a PyCapsule, "
                        f"got {type(capsule).__name__}")
    name = PyCapsule_GetName(capsule)
    if name != NULL:
        raise TypeError(f"{_src(obj, '__array_struct__')} is a capsule named "
                        f"{name.decode(errors='replace')!r}; a PyArrayInterface capsule has "
                        "no name")
    return <ArrayInterfaceStruct*>PyCapsule_GetPointer(capsule, NULL)


cdef object view_from_array_struct_capsule(object obj, object capsule, TensorView* out):
    cdef ArrayInterfaceStruct* s = _struct_of(obj, capsule)
    view_from_array_struct(s[0], out)
    if (s.flags & kArrHasDescr) and s.descr != NULL:
        _check_struct_descr(obj, <object>s.descr, out)
    # The capsule keeps the struct (and, by its context, usually the data)
    # alive; the object is kept as well because the spec lets exporters rely
    # on the consumer holding it.
    return (capsule, obj)


cdef object view_from_array_struct_items(object obj, object capsule, TensorView* out):
    """view_from_array_struct_capsule with the items read as unsigned integers
    of their size: for an exporter whose dtype, not its typekind, says what
    they are (an extension dtype calls them void, 'V').  Every other field is
    checked as usual; the caller sets the dtype."""
    cdef ArrayInterfaceStruct items = _struct_of(obj, capsule)[0]
    items.typekind = b'u'
    items.flags &= ~kArrHasDescr
    view_from_array_struct(items, out)
    return (capsule, obj)


cdef object view_from_typed_buffer(object obj, object dtype, object shape, object strides,
                                   object offset, TensorView* out):
    ctx = "from_buffer"
    cdef DLDataType dt = parse_dtype(dtype)
    cdef int64_t off = as_int64(offset, "offset")
    cdef int64_t itemsize = dtype_itemsize(dt)
    cdef int64_t avail
    if off < 0:
        raise ValueError(f"offset must be >= 0, got {off}")
    cdef BufferOwner buf = _contiguous_buffer(obj, ctx)
    out.dtype = dt
    if shape is None:
        if strides is not None:
            raise ValueError("from_buffer: strides need an explicit shape")
        avail = buf.buf.len - off
        if avail < 0:
            raise ValueError(f"offset {off} is beyond the end of the {buf.buf.len}-byte buffer")
        if avail % itemsize != 0:
            raise ValueError(f"buffer size minus offset ({avail} bytes) is not a multiple of "
                             f"the item size {itemsize}")
        shape = (avail // itemsize,)
    elif not isinstance(shape, tuple):
        shape = (shape,) if not isinstance(shape, list) else tuple(shape)
    _parse_shape(shape, ctx, out)
    if isinstance(strides, list):
        strides = tuple(strides)
    _parse_byte_strides(strides, ctx, b"from_buffer", out)
    out.data = buf.buf.buf
    out.byte_offset = <uint64_t>off
    out.readonly = buf.buf.readonly != 0
    out.device.device_type = kDLCPU
    out.device.device_id = 0
    out.ready_stream = NULL
    validate_within(out[0], buf.buf.buf, buf.buf.len)
    fold_byte_offset(out[0])
    return buf


cdef tuple call_array_method(object obj, object copy):
    method = obj.__array__
    if copy is None:
        return (method(), False)
    try:
        return (method(copy=copy), copy is True)
    except TypeError:
        # A pre-NumPy-2 signature without `copy`: the caller copies if asked.
        return (method(), False)


# -- export -----------------------------------------------------------------

cdef int _check_host(const TensorView* v, str what) except -1:
    try:
        require_host_memory(v.device, f"describe the data with {what}".encode())
    except BufferError as e:
        # A protocol probe: AttributeError makes consumers (NumPy) move on.
        raise AttributeError(f"{e}; use __dlpack__") from None
    if v.device.device_type != kDLCPU:
        # CUDA hook: pinned/managed memory is handed to the host once ready.
        synchronize_for_host_read(v)
    return 0


cdef str _typestr_or_raise(const TensorView* v, str what):
    cdef string ts = typestr_from_dtype(v.dtype)
    if ts.size() == 0:
        # AttributeError, not BufferError: consumers such as NumPy then move on
        # to the next protocol (__array__, which understands ml_dtypes).
        raise AttributeError(
            f"{what} cannot express dtype {dtype_name(v.dtype).decode()}: use __dlpack__ or "
            "__array__")
    return ts.decode()


cdef dict export_array_interface(const TensorView* v, tuple shape):
    cdef int i
    _check_host(v, "__array_interface__")
    typestr = _typestr_or_raise(v, "__array_interface__")
    strides = None
    if not is_c_contiguous(v[0]):
        strides = tuple([byte_stride(v[0], i) for i in range(v.ndim)])
    ptr = 0 if v.data == NULL else <uintptr_t>v.data + v.byte_offset
    return {
        "shape": shape,
        "typestr": typestr,
        "descr": [("", typestr)],
        "data": (ptr, bool(v.readonly)),
        "strides": strides,
        "version": 3,
    }


cdef void _array_struct_destructor(object capsule) noexcept:
    cdef void* ctx = PyCapsule_GetContext(capsule)
    free_array_struct(<ArrayInterfaceStruct*>PyCapsule_GetPointer(capsule, NULL))
    # The context is the strong reference that kept the exporter alive.
    Py_XDECREF(<PyObject*>ctx)


cdef object export_array_struct(const TensorView* v, object keepalive):
    _check_host(v, "__array_struct__")
    _typestr_or_raise(v, "__array_struct__")
    cdef ArrayInterfaceStruct* s = new_array_struct(v[0])
    try:
        capsule = PyCapsule_New(s, NULL, _array_struct_destructor)
    except BaseException:
        free_array_struct(s)
        raise
    # NumPy's convention: the capsule context holds a reference to the
    # exporter so the data outlives every user of the capsule.
    Py_INCREF(keepalive)
    PyCapsule_SetContext(capsule, <void*>keepalive)
    return capsule


class _InterfaceHolder:
    """What NumPy wraps: our ``__array_interface__`` plus the exporter, which
    the resulting ndarray keeps alive as its ``base``."""
    __slots__ = ("__array_interface__", "exporter")

    def __init__(self, iface, exporter):
        self.__array_interface__ = iface
        self.exporter = exporter


cdef object _import_numpy():
    global _numpy
    if _numpy is None:
        import numpy
        _numpy = numpy
    return _numpy


cdef object _export_extension_dtype(object np, const TensorView* v, tuple shape,
                                    object keepalive):
    """bfloat16/float8, which NumPy knows only through ml_dtypes: the same
    bytes described as unsigned ints of the same width, then reinterpreted.
    Apart from export_numpy, whose every call would otherwise construct and
    destroy the C++ string of the name and the TensorView copy."""
    cdef TensorView raw
    name = dtype_name(v.dtype).decode()
    try:
        import ml_dtypes
        target = np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError, TypeError):
        raise TypeError(f"NumPy has no dtype {name}; install ml_dtypes to convert it, or "
                        "use DLPack") from None
    raw = v[0]
    raw.dtype.code = kDLUInt
    arr = np.asarray(_InterfaceHolder(export_array_interface(&raw, shape), keepalive))
    return arr.view(target)


cdef object export_numpy(const TensorView* v, tuple shape, object keepalive, object dtype,
                         object copy):
    parse_copy(copy)
    require_host_memory(v.device, b"export the data through __array__")
    if v.device.device_type != kDLCPU:
        synchronize_for_host_read(v)  # CUDA hook: pinned/managed memory
    np = _import_numpy()
    if pep3118_from_dtype(v.dtype) != NULL:
        # The buffer protocol is NumPy's fastest zero-copy route; the
        # memoryview's Py_buffer keeps `keepalive` (the exporter) alive.
        arr = np.asarray(memoryview(keepalive))
    else:
        arr = _export_extension_dtype(np, v, shape, keepalive)
    if dtype is not None:
        wanted = np.dtype(dtype)
        if wanted != arr.dtype:
            if copy is False:
                raise ValueError(f"converting {arr.dtype} to {wanted} needs a copy, but "
                                 "copy=False was given")
            return arr.astype(wanted)
    if copy is True:
        return arr.copy()
    return arr


# -- Extension dtypes (ml_dtypes' bfloat16, float8, ...) on import ---------------------------

# NumPy's own dtypes, which NumPy exports through DLPack when it can at all.
cdef frozenset _NUMPY_NATIVE_NAMES = frozenset([
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"])


# NumPy kinds whose interface refusals stand as they are: NumPy's own numeric
# types (refused for byte order or width) and the data DLPack cannot describe
# (datetime, str, object, ...), whose refusal names the kind.  Extension dtypes
# use 'V', 'f' (float8_e5m2) and kinds of their own ('W': ml_dtypes' complex32).
cdef str _OWN_REFUSAL_KINDS = "biucmMOSUatT"


cdef object view_from_extension_interface(object obj, TensorView* out):
    """Called when ``obj``'s array struct or interface was refused (BufferError,
    or TypeError for a kind no NumPy type has): one of an extension dtype calls
    its items opaque bytes ('|V1', '<V2'), a typestr no DLPack type matches
    ('<f1') or a kind of its own ('W'), and its dtype names the type, as after
    a refused ``__dlpack__``.  Returns the owner, or None: the refusal stands.
    A NumPy scalar's interfaces point into a temporary array, so a scalar
    (ml_dtypes.bfloat16(2.0)) is imported as the 0-d array its ``__array__``
    makes, the one its interfaces describe."""
    kind = getattr(getattr(obj, "dtype", None), "kind", None)
    if not isinstance(kind, str) or len(kind) != 1 or kind in _OWN_REFUSAL_KINDS:
        return None
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.generic):
        return view_from_extension_dtype(obj.__array__(), obj, out)
    return view_from_extension_dtype(obj, obj, out)


cdef object view_from_extension_dtype(object obj, object named, TensorView* out):
    """Called when a producer with a NumPy dtype refused DLPack export (``named``:
    the object to name in errors, None for ``obj`` itself).

    NumPy refuses extension dtypes (ml_dtypes bfloat16 and float8) that
    DLPack itself carries; their array interface calls the bytes opaque void,
    and the dtype's name says what they are, so they are imported from there.
    A dtype dlpackarray cannot hold at all (datetime64, str, object,
    structured, ml_dtypes' sub-byte int4/float4_e2m1fn) raises BufferError
    naming it, instead of NumPy's generic refusal.  Returns the owner, or None
    when the producer's BufferError should stand (no NumPy dtype, or one
    dlpackarray supports that the producer refused for another reason, such as
    byte order)."""
    cdef DLDataType dt
    np_dtype = getattr(obj, "dtype", None)
    name = getattr(np_dtype, "name", None)
    if (not isinstance(name, str) or not isinstance(getattr(np_dtype, "kind", None), str)
            or name in _NUMPY_NATIVE_NAMES):
        return None
    supported = getattr(np_dtype, "fields", None) is None
    reason = (f"dlpackarray exchanges whole-byte numeric types only; "
              f"{supported_dtypes_text().decode()}")
    if supported:
        try:
            dt = parse_dtype(name)
        except BufferError as exc:
            supported, reason = False, str(exc)  # a known type it cannot hold: why
        except (TypeError, ValueError):
            supported = False
    if not supported:
        raise BufferError(
            f"cannot import a '{type(obj if named is None else named).__name__}' of dtype "
            f"{name!r}: {reason}")
    if getattr(np_dtype, "isnative", False) is not True:
        return None  # byte-swapped: the producer's refusal names the byte order
    if dtype_itemsize(dt) != getattr(np_dtype, "itemsize", -1):
        return None
    iface = getattr(obj, "__array_interface__", None)
    if type(iface) is not dict:
        # An exporter of __array_struct__ alone: its items, as unsigned bytes.
        struct = getattr(obj, "__array_struct__", None)
        if struct is None:
            return None
        owner = view_from_array_struct_items(obj, struct, out)
        out.dtype = dt
        return owner
    opaque = dict(<dict>iface)
    opaque["typestr"] = f"|u{np_dtype.itemsize}" if np_dtype.itemsize == 1 else \
        f"{'<' if sys.byteorder == 'little' else '>'}u{np_dtype.itemsize}"
    opaque.pop("descr", None)
    owner = view_from_array_interface(obj, opaque, out)
    out.dtype = dt
    return owner
