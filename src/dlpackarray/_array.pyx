# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPackArray: one zero-copy view that speaks every array protocol."""
cimport cython

from cpython.buffer cimport Py_buffer
from libc.stdint cimport int64_t, uintptr_t

from dlpackarray.core cimport kDLPackMajorVersion, kDLPackMinorVersion
from dlpackarray.core cimport (
    TensorView, dtype_itemsize, is_c_contiguous, is_f_contiguous, view_nbytes, view_size,
)
from dlpackarray._internal cimport copy_to_bytes, copy_to_heap, device_tuple, dtype_object
from dlpackarray._internal cimport fill, fill_buffer
from dlpackarray._internal cimport export_capsule
from dlpackarray._internal cimport (
    export_array_interface, export_array_struct, export_numpy, view_from_typed_buffer,
)
from dlpackarray._internal cimport index_into, permute_into, reinterpret_into, reshape_into
from dlpackarray._internal cimport export_arrow, export_arrow_schema
from dlpackarray._internal cimport (
    contains_of, index_of, item_of, scalar_of, tolist_of, truth_of,
)
from dlpackarray._internal cimport export_cuda_array_interface

from dlpackarray._devices import DLDeviceType

cdef tuple _DLPACK_INFO = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))

# dlpackarray._pickle, imported on first use: it cimports this module.
cdef object _pickle_module = None


cdef object _pickling():
    global _pickle_module
    if _pickle_module is None:
        from dlpackarray import _pickle
        _pickle_module = _pickle
    return _pickle_module


cdef DLPackArray wrap_view(const TensorView* v, object owner):
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    a._view = v[0]
    a.owner = owner
    mark_ready(a)
    return a


cdef int raise_not_ready(DLPackArray self) except -1:
    # ValueError, as CPython's io does for an uninitialised object, and not
    # TypeError: consumers retry __dlpack__ with fewer keywords on TypeError.
    if self._state == kInitialising:
        raise ValueError(
            "this DLPackArray is not initialised yet: its __init__ is still running (code the "
            "source runs during the import cannot use the array being imported into)")
    if self._state == kFailed:
        raise ValueError(
            "this DLPackArray is not initialised: its __init__ failed; create a new DLPackArray")
    raise ValueError(
        f"this {type(self).__name__} is not initialised: it was made by __new__ without a "
        "successful DLPackArray.__init__; create arrays with DLPackArray(obj)")


def require_ready(DLPackArray a not None):
    """Raises what every member raises for ``a`` when it is not ready (check_ready),
    for the Python-level hooks that read an array's fields without a member."""
    check_ready(a)


cdef inline int _initialise(DLPackArray self, object obj, object copy, object device,
                            object stream) except -1:
    """The body of ``DLPackArray.__init__``."""
    if self._state != kUninitialised:
        # Exports of a ready array point into its descriptor; a failed or
        # running initialisation is not restartable either (a source's
        # code re-entering __init__ must not replace what the outer call
        # is writing).
        raise TypeError("DLPackArray is immutable: it cannot be initialised twice"
                        if self._state == kReady else
                        "DLPackArray is immutable: it cannot be initialised twice (its "
                        "first initialisation " + ("is still running)"
                                                   if self._state == kInitialising
                                                   else "failed)"))
    return fill(self, obj, copy, device, False, stream)


# DLPackArray(x) with one positional argument enters through the type's
# vectorcall slot, patched in _fast_entries.pyx (_construct).  Exchanges make
# and drop one array per call: Cython's freelist keeps dead instances.
@cython.freelist(16)
cdef class DLPackArray:
    # The first line is the signature inspect.signature() reads (Cython embeds
    # none in clinic format for classes, and misplaces "/" in the others).
    """DLPackArray(obj, /, *, copy=None, device=None, stream=None)\n--\n\n\
    A zero-copy view of any array-like object, re-exported through every protocol.

    Parameters
    ----------
    obj : object
        A DLPack producer (``__dlpack__``), a ``"dltensor"`` or
        ``"dltensor_versioned"`` capsule (consumed), another
        :class:`DLPackArray`, an object with ``__array_struct__`` or
        ``__array_interface__`` (NumPy array interface, version 3), an
        object with ``__cuda_array_interface__`` (versions 2 and 3), any
        PEP 3118 buffer exporter (bytes, bytearray, memoryview, array.array,
        mmap, ctypes arrays, ...) or, as a last resort, an object with
        ``__array__``.  The first protocol in this order wins: ``__dlpack__``,
        ``__cuda_array_interface__``, ``__array_struct__``,
        ``__array_interface__``, buffer protocol, ``__array__``.
    copy : bool or None, optional
        ``True`` always copies into a new C-contiguous host array, ``False``
        never copies (errors if a copy would be needed), ``None`` copies only
        when needed.
    device : None, "cpu" or (int, int), optional
        Requested device: the source's own, or the CPU (pinned/managed CUDA
        memory is synchronised and relabelled, CUDA device memory copied to
        the host); anything else raises :class:`BufferError`.
    stream : int or None, optional
        The consumer's CUDA stream (1: legacy default stream, 2: per-thread,
        larger: a ``CUstream`` handle, -1: no synchronisation; 0 is refused
        for CUDA, anything but -1 for CPU data).  A DLPack producer gets it
        in ``__dlpack__`` after its ``__dlpack_device__`` was asked; for other
        sources (CUDA array interface, capsules, DLPackArrays) dlpackarray
        orders it after the data's ready stream itself.  Either way the data
        is then ready on that stream.  ``None``: a CUDA producer is asked
        with the legacy stream (1).  Every value, per device type:
        docs/cuda.md, "Stream rules".

    Notes
    -----
    The source object (and any ``Py_buffer`` taken from it) stays alive until
    the last DLPackArray, capsule or consumer array using its memory is gone.

    An array is initialised once: ``__init__`` again raises
    :class:`TypeError`, and an object that is not initialised (made by
    ``DLPackArray.__new__`` alone, or whose ``__init__`` is still running or
    failed) raises :class:`ValueError` from every method, property and
    protocol slot; its ``repr()`` names the state instead.
    """

    # No __cinit__: an object that is not ready is refused by every method,
    # property, protocol slot and C API entry point (check_ready), and a new
    # one holds the TensorView's default state (no data, owner None).  Only a
    # failed initialisation resets to the placeholder, to drop the source's
    # memory at once (_initialise).

    # DLPackArray(x) skips this method: fast entry _fast_entries.pyx (_construct).
    def __init__(self, obj, /, *, copy=None, device=None, stream=None):
        _initialise(self, obj, copy, device, stream)

    # -- DLPack ---------------------------------------------------------------
    # Fast entry: _fast_entries.pyx (_dlpack_entry), installed over this method
    # with its docstring; this body is what runs where it cannot be installed.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule (see the DLPack Python specification).

        Parameters
        ----------
        stream : int or None
            Consumer stream.  For CUDA data (docs/cuda.md) the consumer's
            stream is made to wait for the data's ready stream with an event
            (no host blocking): ``None`` and 1 name the legacy default
            stream, 2 per-thread, larger values a ``CUstream``; -1 asks for
            no synchronisation and 0 raises :class:`ValueError`.  CPU data
            accepts only ``None`` and -1 (:class:`ValueError` otherwise);
            other devices raise :class:`BufferError` for a stream.
        max_version : tuple of (int, int) or None
            ``None`` gives a legacy ``"dltensor"`` capsule; major >= 1 a
            versioned ``"dltensor_versioned"`` capsule at version 1.3.
        dl_device : tuple of (int, int) or None
            Target device: the array's own device, or the CPU
            (host-accessible memory is synchronised and shared, CUDA device
            memory copied to the host with IS_COPIED set, refused with
            ``copy=False``); anything else raises :class:`BufferError`.
        copy : bool or None
            ``True`` exports a fresh C-contiguous copy flagged IS_COPIED (on
            the device for CUDA data).

        Returns
        -------
        PyCapsule
        """
        check_ready(self)
        return export_capsule(&self._view, self.owner, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        """Return ``(device_type, device_id)`` with ``device_type`` a :class:`DLDeviceType`."""
        check_ready(self)
        return device_tuple(self._view.device)

    def __dlpack_info__(self):
        """Return the newest DLPack version this producer supports, ``(1, 3)``."""
        check_ready(self)
        return _DLPACK_INFO

    # -- Arrow PyCapsule interface (docs/arrow.md) -----------------------------
    def __arrow_c_schema__(self):
        """Export the Arrow type this array exports as, as an ``"arrow_schema"`` capsule.

        1-D data is a primitive array, N-D data the ``arrow.fixed_shape_tensor``
        extension (one row per leading index), bool ``arrow.bool8``.  Raises
        :class:`TypeError` for dtypes Arrow cannot carry (bfloat16, complex,
        float8).
        """
        check_ready(self)
        return export_arrow_schema(&self._view)

    def __arrow_c_array__(self, requested_schema=None, *, copy=None):
        """Export as ``("arrow_schema", "arrow_array")`` capsules (host memory).

        Raises :class:`BufferError` for memory the host cannot read (CUDA
        device memory: use :meth:`__arrow_c_device_array__`); pinned and
        managed memory is synchronised with its ready stream first.

        Parameters
        ----------
        requested_schema : PyCapsule or None
            An ``"arrow_schema"`` capsule; honoured best effort: bit-packed
            ``"b"`` booleans, or nested fixed-size lists instead of
            ``arrow.fixed_shape_tensor``.
        copy : bool or None
            dlpackarray extension: ``None`` copies only data Arrow cannot
            describe (gaps, negative or zero strides), ``False`` raises
            :class:`BufferError` instead, ``True`` always copies.

        Returns
        -------
        tuple of (PyCapsule, PyCapsule)
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, False, False, None)

    def __arrow_c_stream__(self, requested_schema=None, *, copy=None):
        """Export as an ``"arrow_array_stream"`` capsule holding one chunk.

        Parameters as :meth:`__arrow_c_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, False, True, None)

    # Fast entry: _fast_entries.pyx (_device_array_entry).
    def __arrow_c_device_array__(self, requested_schema=None, *, copy=None, **kwargs):
        """Export as ``("arrow_schema", "arrow_device_array")`` capsules.

        Host data has device type 1 (CPU), device id -1 and no sync event.
        CUDA data (device types 2, 3, 13) keeps its device type and id and
        carries a sync event recorded on its ready stream; a copy it needs
        is made on its device.  Other keywords are accepted when ``None``
        (for future additions) and raise :class:`NotImplementedError`
        otherwise.  Parameters as :meth:`__arrow_c_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, True, False, kwargs)

    # Fast entry: _fast_entries.pyx (_device_stream_entry).
    def __arrow_c_device_stream__(self, requested_schema=None, *, copy=None, **kwargs):
        """Export as an ``"arrow_device_array_stream"`` capsule holding one chunk.

        Parameters as :meth:`__arrow_c_device_array__`.
        """
        check_ready(self)
        return export_arrow(&self._view, self.owner, requested_schema, copy, True, True, kwargs)

    # -- buffer protocol ------------------------------------------------------
    def __getbuffer__(self, Py_buffer* buffer, int flags):
        check_ready(self)
        cdef int64_t* strides = NULL
        # The byte strides are made with the layout, on the first export
        # (fill_buffer), and read by every later one.
        if self._view.ndim <= 8:
            strides = self._byte_strides_inline
        else:
            if not self._buffer_layout.known:
                self._byte_strides.resize(self._view.ndim)
            strides = self._byte_strides.data()
        fill_buffer(buffer, self, &self._view, strides, flags, &self._buffer_layout)

    def __bytes__(self):
        """``bytes(a)``: the elements in C order, as ``bytes`` of the buffer gives
        them, copied by the core's strided copy (the buffer protocol's own
        fallback copies a non-contiguous buffer item by item)."""
        check_ready(self)
        return copy_to_bytes(self, &self._view)

    # -- properties -----------------------------------------------------------
    @property
    def shape(self):
        """tuple of int: extent of each dimension."""
        check_ready(self)
        cdef int i
        if self._shape is None:
            self._shape = tuple([self._view.shape[i] for i in range(self._view.ndim)])
        return self._shape

    @property
    def strides(self):
        """tuple of int: strides in elements (DLPack convention, not bytes)."""
        check_ready(self)
        cdef int i
        if self._strides is None:
            self._strides = tuple([self._view.strides[i] for i in range(self._view.ndim)])
        return self._strides

    @property
    def dtype(self):
        """DType: data type (``code``, ``bits``, ``lanes``, ``name``)."""
        check_ready(self)
        return dtype_object(self._view.dtype)

    @property
    def device(self):
        """tuple: ``(DLDeviceType, device_id)``, as ``__dlpack_device__``."""
        check_ready(self)
        return device_tuple(self._view.device)

    @property
    def ndim(self):
        """int: number of dimensions."""
        check_ready(self)
        return self._view.ndim

    @property
    def size(self):
        """int: number of elements."""
        check_ready(self)
        return view_size(self._view)

    @property
    def itemsize(self):
        """int: bytes per element."""
        check_ready(self)
        return dtype_itemsize(self._view.dtype)

    @property
    def nbytes(self):
        """int: ``size * itemsize``.

        Raises
        ------
        OverflowError
            If it does not fit in int64 (a broadcast view of more elements
            than that, which can be neither copied nor exported as a buffer).
        """
        check_ready(self)
        return view_nbytes(self._view)

    @property
    def readonly(self):
        """bool: whether consumers must not write to the data."""
        check_ready(self)
        return self._view.readonly

    @property
    def data_ptr(self):
        """int: ``DLTensor.data``.

        For host and CUDA-family memory (every device whose data is a plain
        address) this is the address of the first element and
        :attr:`byte_offset` is always 0: every import folds the offset into
        it, as NumPy and PyTorch export.  For OpenCL, Vulkan and Metal it is an
        opaque buffer handle and the first element is :attr:`byte_offset`
        bytes into that buffer.
        """
        check_ready(self)
        return <uintptr_t>self._view.data

    @property
    def byte_offset(self):
        """int: bytes from ``data_ptr`` to the first element (0 unless ``data_ptr`` is opaque)."""
        check_ready(self)
        return self._view.byte_offset

    @property
    def c_contiguous(self):
        """bool: whether the elements are dense in C (row-major) order."""
        check_ready(self)
        return is_c_contiguous(self._view)

    @property
    def f_contiguous(self):
        """bool: whether the elements are dense in Fortran (column-major) order."""
        check_ready(self)
        return is_f_contiguous(self._view)

    def copy(self):
        """Return a C-contiguous, writable host copy as a new :class:`DLPackArray`."""
        check_ready(self)
        cdef TensorView result
        owner = copy_to_heap(&self._view, &result)
        return wrap_view(&result, owner)

    # -- pickle and copy (docs/processes.md; the machinery is in _pickle.pyx) ------
    def __reduce_ex__(self, protocol, /):
        """Pickle support: protocol 5 ships the data out-of-band (no copy) when
        pickle has a ``buffer_callback``; only the bytes the elements span (a
        dense copy of the elements when the span is over twice their bytes).
        A subclass keeps its type and instance state."""
        check_ready(self)
        return _pickling().reduce_array(self, protocol)

    def __copy__(self):
        """``copy.copy``: a writable C-contiguous copy with memory of its own (a
        subclass keeps its type and a shallow copy of its instance state)."""
        check_ready(self)
        return _pickling().copy_array(self)

    def __deepcopy__(self, memo, /):
        """``copy.deepcopy``: as :meth:`__copy__` (the elements hold no objects);
        a subclass's instance state is deep-copied."""
        check_ready(self)
        return _pickling().copy_array(self, memo)

    # -- zero-copy views -------------------------------------------------------
    def __getitem__(self, key):
        """Basic indexing (ints, slices with any step, ``...``, ``None``) as a view.

        Integers remove a dimension, so indexing every dimension gives a 0-d
        :class:`DLPackArray` (not a Python scalar).  Integer-array and boolean
        indices would copy and raise :class:`IndexError`.
        """
        check_ready(self)
        cdef TensorView result
        index_into(&self._view, key, &result)
        return wrap_view(&result, self.owner)

    def reshape(self, *shape, order="C"):
        """Return a view with a new shape; never copies.

        Parameters
        ----------
        *shape : int or tuple of int
            The new shape, as separate ints or one tuple/list; one entry may
            be ``-1`` (inferred).
        order : {"C", "F"}, optional
            Read and place elements in C (row-major) or Fortran order.

        Returns
        -------
        DLPackArray
            A view sharing this array's memory.

        Raises
        ------
        ValueError
            If the sizes differ, or if the strides cannot express the new
            shape (reshape never copies silently; copy first with
            :meth:`copy`).
        """
        check_ready(self)
        cdef TensorView result
        reshape_into(&self._view, shape, order, &result)
        return wrap_view(&result, self.owner)

    def transpose(self, *axes):
        """Return a view with permuted axes (reversed when none are given).

        Parameters
        ----------
        *axes : int or tuple of int
            Output dimension ``i`` is input dimension ``axes[i]``; negative
            axes count from the end.
        """
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, axes, True, &result)
        return wrap_view(&result, self.owner)

    def permute(self, *dims):
        """Return a view with permuted dimensions (``torch.Tensor.permute``).

        Parameters
        ----------
        *dims : int or tuple of int
            A permutation of all dimensions; negative values count from the end.
        """
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, dims, False, &result)
        return wrap_view(&result, self.owner)

    @property
    def T(self):
        """DLPackArray: the view with all axes reversed (``transpose()``)."""
        check_ready(self)
        cdef TensorView result
        permute_into(&self._view, (), True, &result)
        return wrap_view(&result, self.owner)

    def view(self, dtype):
        """Reinterpret the same bytes as another dtype (a view, never a copy).

        Parameters
        ----------
        dtype : DType, str or dtype-like
            The new element type.  With a different item size the last
            dimension must be contiguous and hold a whole number of new
            items, and every other stride must be a whole number of new items.

        Raises
        ------
        ValueError
            If the layout does not allow the reinterpretation.
        """
        check_ready(self)
        cdef TensorView result
        reinterpret_into(&self._view, dtype, &result)
        return wrap_view(&result, self.owner)

    @staticmethod
    def from_buffer(obj, dtype, shape=None, strides=None, offset=0):
        """Typed zero-copy view of a contiguous buffer's raw bytes.

        Like ``numpy.frombuffer`` but N-dimensional and strided; the buffer's
        own format is ignored.

        Parameters
        ----------
        obj : buffer-protocol object
            Exporter of a contiguous buffer (bytes, bytearray, mmap, ...).
        dtype : DType, str or dtype-like
            Element type.
        shape : int or tuple of int, optional
            Default: a 1-D array of every whole item after ``offset``.
        strides : tuple of int, optional
            Strides in **bytes** (like NumPy and the array interface);
            default C-contiguous.  Requires ``shape``.
        offset : int, optional
            Bytes from the start of the buffer to the first element:
            ``0 <= offset <= len(buffer)``, empty arrays included (the
            rule of ``numpy.frombuffer``).

        Returns
        -------
        DLPackArray
            Read-only when the buffer is.

        Raises
        ------
        TypeError
            If ``dtype`` names no type (an unknown name, or one with
            non-ASCII or NUL characters).
        BufferError
            If ``dtype`` names a type DLPack cannot carry element by element
            (the sub-byte ``int4``, ``float4_e2m1fn``, ...).
        ValueError
            If shape, strides and offset reach outside the buffer, or the
            offset is beyond its end.
        """
        cdef TensorView v
        owner = view_from_typed_buffer(obj, dtype, shape, strides, offset, &v)
        return wrap_view(&v, owner)

    # -- CUDA array interface (docs/cuda.md) -------------------------------------
    @property
    def __cuda_array_interface__(self):
        """dict: Numba's CUDA array interface, version 3 (CUDA memory only).

        ``stream`` is the stream the data is ready on (1 for the legacy
        default stream), or None when nothing is pending.  Raises
        :class:`AttributeError` for other devices.
        """
        check_ready(self)
        return export_cuda_array_interface(&self._view, self.shape)

    # -- NumPy array interface --------------------------------------------------
    @property
    def __array_interface__(self):
        """dict: NumPy array interface, version 3 (host memory only).

        ``data`` is ``(address of the first element, readonly)``, ``strides``
        is ``None`` when C-contiguous.  Raises :class:`AttributeError` (so
        that consumers move on to another protocol) for device memory and for
        dtypes without a typestr (bfloat16, float8).
        """
        check_ready(self)
        return export_array_interface(&self._view, self.shape)

    @property
    def __array_struct__(self):
        """PyCapsule: NumPy's C-level array interface (``PyArrayInterface``).

        The capsule holds a reference to this array until it is destroyed.
        Same availability as :attr:`__array_interface__`.
        """
        check_ready(self)
        return export_array_struct(&self._view, self)

    def __array__(self, dtype=None, copy=None):
        """Return a ``numpy.ndarray`` (NumPy 2 semantics; NumPy imported lazily).

        Parameters
        ----------
        dtype : dtype-like, optional
            Convert to this dtype (a copy unless it already matches).
        copy : bool or None, optional
            ``True`` always copies; ``False`` never does (``ValueError`` if a
            dtype conversion would be needed); ``None`` copies only if needed.

        Returns
        -------
        numpy.ndarray
            A view of this array's memory unless a copy was needed or asked
            for; read-only when this array is.  bfloat16/float8 data becomes an
            ``ml_dtypes`` array (``TypeError`` without ml_dtypes).
        """
        check_ready(self)
        return export_numpy(&self._view, self.shape, self, dtype, copy)

    # -- Python scalars ----------------------------------------------------------
    def item(self, *args):
        """Return one element as a Python scalar (``bool``, ``int``, ``float`` or ``complex``).

        Like ``numpy.ndarray.item``.  The value is read from the memory, so
        every dtype works without NumPy; bfloat16 and float8 give ``float``.

        Parameters
        ----------
        *args : int or tuple of int
            Nothing for an array of size 1; one int for a flat index in C
            order; one int per dimension (or one tuple of them) for a
            multi-index.  Negative indices count from the end.

        Raises
        ------
        ValueError
            Without arguments if the size is not 1, or for a wrong number of
            indices.
        IndexError
            If an index is out of bounds.
        BufferError
            If the data is not in host-accessible memory.
        """
        check_ready(self)
        return item_of(&self._view, args)

    def tolist(self):
        """Return the elements as nested lists of Python scalars (a scalar for 0-d arrays).

        Like ``numpy.ndarray.tolist``; the scalars are those of :meth:`item`.

        Raises
        ------
        BufferError
            If the data is not in host-accessible memory.
        MemoryError
            If the result has more entries than Python lists can hold, or
            needs more memory than the process can hold (physical memory or
            ``RLIMIT_AS``): raised before anything is built.
        """
        check_ready(self)
        return tolist_of(&self._view)

    def __float__(self):
        check_ready(self)
        return float(scalar_of(&self._view))

    def __int__(self):
        check_ready(self)
        return int(scalar_of(&self._view))

    def __complex__(self):
        check_ready(self)
        return complex(scalar_of(&self._view))

    def __index__(self):
        check_ready(self)
        return index_of(&self._view)

    def __bool__(self):
        check_ready(self)
        return truth_of(&self._view)

    def __len__(self):
        check_ready(self)
        if self._view.ndim == 0:
            raise TypeError("len() of a 0-d DLPackArray")
        return self._view.shape[0]

    def __contains__(self, value):
        """``value in a``: whether some element equals ``value``, as NumPy's
        ``(a == value).any()``; each distinct element is read once (a broadcast
        array reads its few real elements)."""
        check_ready(self)
        return contains_of(&self._view, value)

    def __repr__(self):
        # Never raises (debuggers and tracebacks call it): names the state.
        if self._state != kReady:
            return (f"<{type(self).__name__} (uninitialised)>" if self._state == kUninitialised
                    else f"<{type(self).__name__} (initialising)>"
                    if self._state == kInitialising
                    else f"<{type(self).__name__} (initialisation failed)>")
        dev_type, dev_id = device_tuple(self._view.device)
        dev_name = dev_type.name.lower() if isinstance(dev_type, DLDeviceType) else str(dev_type)
        return (f"DLPackArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"strides={self.strides}, device='{dev_name}:{dev_id}', "
                f"readonly={bool(self._view.readonly)})")


def from_dlpack(x, /, *, device=None, copy=None, stream=None):
    """Consume a DLPack producer (or capsule) as a :class:`DLPackArray`.

    Follows the array API ``from_dlpack``: asks ``x.__dlpack__`` for a
    versioned capsule (``max_version=(1, 3)``) and passes ``dl_device``/``copy``
    on; a producer that refuses those keywords is asked again with
    ``max_version`` only, then with none, and whatever it could not take is
    applied here.  NumPy arrays of ``ml_dtypes`` bfloat16/float8, which
    NumPy refuses to export, are imported as :class:`DLPackArray` does.
    pyarrow arrays other than plain integer and floating-point ones are read
    through their Arrow capsules, which define them (docs/arrow.md,
    "Precedence").

    Parameters
    ----------
    x : object
        An object with ``__dlpack__``, or a DLPack capsule (consumed).
    device : None, "cpu" or (int, int), optional
        Target device; None keeps the producer's device.
    copy : bool or None, optional
        ``True`` always copies, ``False`` never copies, ``None`` copies only if needed.
    stream : int or None, optional
        The consumer's CUDA stream, as for :class:`DLPackArray`.

    Returns
    -------
    DLPackArray

    Raises
    ------
    AttributeError
        If ``x`` has no ``__dlpack__`` method and is not a capsule.
    BufferError
        If the producer cannot export the data as requested, or its dtype is
        one dlpackarray cannot hold (the message names it).
    ValueError
        If ``x`` is Arrow data with nulls (the message counts them).
    """
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    fill(a, x, copy, device, True, stream)
    return a


cdef DLPackArray new_from_object(object obj, object copy, object device):
    """``DLPackArray(obj, copy=copy, device=device)`` without the Python call."""
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    fill(a, obj, copy, device, False, None)
    return a
