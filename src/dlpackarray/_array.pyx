# cython: language_level=3, boundscheck=False, wraparound=False
"""DLPackArray: one zero-copy view that speaks every array protocol."""
import array as _array_module
import mmap as _mmap_module

from cpython.buffer cimport PyObject_CheckBuffer, Py_buffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pycapsule cimport PyCapsule_CheckExact
from libc.stdint cimport int64_t, uintptr_t

from dlpackarray.abi cimport DLDevice, kDLCPU, kDLPackMajorVersion, kDLPackMinorVersion
from dlpackarray.core cimport (
    TensorView, device_is_host_accessible, dtype_itemsize, is_c_contiguous, is_f_contiguous,
    view_size,
)
from dlpackarray._common cimport copy_to_heap, device_tuple, dtype_object, parse_device
from dlpackarray._buffer cimport fill_buffer, view_from_buffer
from dlpackarray._dlpack cimport (
    ManagedOwner, export_capsule, request_capsule, view_from_capsule,
)

from dlpackarray._devices import DLDeviceType

# Exact types known to speak the buffer protocol and nothing richer: they skip
# the attribute probes of the precedence chain.
cdef frozenset _BUFFER_ONLY_TYPES = frozenset(
    [bytes, bytearray, memoryview, _array_module.array, _mmap_module.mmap])

cdef tuple _DLPACK_INFO = (int(kDLPackMajorVersion), int(kDLPackMinorVersion))


cdef DLPackArray wrap_view(const TensorView* v, object owner):
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    a.view = v[0]
    a.owner = owner
    return a


cdef int _check_copy_arg(object copy) except -1:
    if copy is not None and copy is not True and copy is not False:
        raise TypeError(f"copy must be None, True or False, got {copy!r}")
    return 0


cdef int _finish_import(DLPackArray self, object copy, object device, bint copied) except -1:
    """Applies the ``device`` and ``copy`` requests to a freshly imported view."""
    cdef DLDevice target
    cdef TensorView result
    if device is not None:
        target = parse_device(device)
        if (target.device_type != self.view.device.device_type
                or target.device_id != self.view.device.device_id):
            if target.device_type == kDLCPU and device_is_host_accessible(self.view.device):
                self.view.device = target
            elif copy is False:
                raise ValueError(
                    f"data on device {device_tuple(self.view.device)} cannot reach device "
                    f"{device_tuple(target)} without a copy, and copy=False was given")
            else:
                raise BufferError(
                    f"cannot move data from device {device_tuple(self.view.device)} to "
                    f"{device_tuple(target)}: dlpackarray copies between host memory only")
    if copy is True and not copied:
        self.owner = copy_to_heap(&self.view, &result)
        self.view = result
    return 0


cdef int _import_into(DLPackArray self, object obj, object copy, object device,
                      bint dlpack_only) except -1:
    """Fills ``self`` from ``obj`` following the documented protocol precedence."""
    cdef DLPackArray other
    cdef ManagedOwner managed
    cdef type t = type(obj)
    _check_copy_arg(copy)
    if t is DLPackArray or isinstance(obj, DLPackArray):
        other = <DLPackArray>obj
        self.view = other.view
        self.owner = other.owner
        return _finish_import(self, copy, device, False)
    if PyCapsule_CheckExact(obj):
        managed = view_from_capsule(obj, &self.view)
        self.owner = managed
        return _finish_import(self, copy, device, False)
    if not dlpack_only and t in _BUFFER_ONLY_TYPES:
        self.owner = view_from_buffer(obj, &self.view)
        return _finish_import(self, copy, device, False)
    if hasattr(t, "__dlpack__"):
        dl_device = None
        if device is not None:
            dl_device = device_tuple(parse_device(device))
        managed = view_from_capsule(request_capsule(obj, dl_device, copy), &self.view)
        self.owner = managed
        return _finish_import(self, copy, device, managed.copied)
    if dlpack_only:
        raise AttributeError(
            f"'{t.__name__}' object has no attribute '__dlpack__': from_dlpack consumes DLPack "
            "producers and capsules only; wrap buffer-protocol or array-interface objects with "
            "dlpackarray.DLPackArray(obj)")
    if PyObject_CheckBuffer(obj):
        self.owner = view_from_buffer(obj, &self.view)
        return _finish_import(self, copy, device, False)
    raise TypeError(
        f"cannot wrap a '{t.__name__}' object: it implements neither __dlpack__ nor the "
        "buffer protocol")


cdef class DLPackArray:
    """A zero-copy view of any array-like object, re-exported through every protocol.

    Parameters
    ----------
    obj : object
        A DLPack producer (``__dlpack__``), a ``"dltensor"`` or
        ``"dltensor_versioned"`` capsule (consumed), another
        :class:`DLPackArray`, or any PEP 3118 buffer exporter (bytes,
        bytearray, memoryview, array.array, mmap, ctypes arrays, NumPy
        arrays, ...).
    copy : bool or None, optional
        ``True`` always copies into a new C-contiguous host array, ``False``
        never copies (errors if a copy would be needed), ``None`` copies only
        when needed.
    device : None, "cpu" or (int, int), optional
        Requested device; only host memory is supported, so anything other
        than the source's device or the CPU raises :class:`BufferError`.

    Notes
    -----
    The source object (and any ``Py_buffer`` taken from it) stays alive until
    the last DLPackArray, capsule or consumer array using its memory is gone.
    """

    def __cinit__(self):
        # Until initialised the array is an empty uint8 vector, so no method
        # can ever expose uninitialised memory.
        self.view.ndim = 1
        self.view.shape[0] = 0
        self.view.strides[0] = 1
        self._byte_strides = NULL

    def __init__(self, obj, /, *, copy=None, device=None):
        if self.owner is not None:
            raise TypeError("DLPackArray is immutable: it cannot be initialised twice")
        # Properties or a buffer export may already have cached the placeholder
        # view of a bare DLPackArray.__new__() instance; they must not outlive it.
        self._shape = None
        self._strides = None
        if self._byte_strides != NULL:
            PyMem_Free(self._byte_strides)
            self._byte_strides = NULL
        _import_into(self, obj, copy, device, False)

    def __dealloc__(self):
        if self._byte_strides != NULL:
            PyMem_Free(self._byte_strides)
            self._byte_strides = NULL

    # -- DLPack ---------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule (see the DLPack Python specification).

        Parameters
        ----------
        stream : int or None
            Consumer stream; for CPU data only ``None`` or ``-1``.
        max_version : tuple of (int, int) or None
            ``None`` gives a legacy ``"dltensor"`` capsule; major >= 1 a
            versioned ``"dltensor_versioned"`` capsule at version 1.3.
        dl_device : tuple of (int, int) or None
            Target device; only the array's own device or the CPU (for
            host-accessible memory) is accepted, anything else raises
            :class:`BufferError`.
        copy : bool or None
            ``True`` exports a fresh C-contiguous copy flagged IS_COPIED.

        Returns
        -------
        PyCapsule
        """
        return export_capsule(&self.view, self.owner, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        """Return ``(device_type, device_id)`` with ``device_type`` a :class:`DLDeviceType`."""
        return device_tuple(self.view.device)

    def __dlpack_info__(self):
        """Return the newest DLPack version this producer supports, ``(1, 3)``."""
        return _DLPACK_INFO

    # -- buffer protocol ------------------------------------------------------
    def __getbuffer__(self, Py_buffer* buffer, int flags):
        cdef int i
        cdef int64_t itemsize
        if self._byte_strides == NULL and self.view.ndim > 0:
            itemsize = dtype_itemsize(self.view.dtype)
            self._byte_strides = <Py_ssize_t*>PyMem_Malloc(self.view.ndim * sizeof(Py_ssize_t))
            if self._byte_strides == NULL:
                raise MemoryError()
            for i in range(self.view.ndim):
                self._byte_strides[i] = self.view.strides[i] * itemsize
        fill_buffer(buffer, self, &self.view, self._byte_strides, flags)

    def __releasebuffer__(self, Py_buffer* buffer):
        pass

    # -- properties -----------------------------------------------------------
    @property
    def shape(self):
        """tuple of int: extent of each dimension."""
        cdef int i
        if self._shape is None:
            self._shape = tuple([self.view.shape[i] for i in range(self.view.ndim)])
        return self._shape

    @property
    def strides(self):
        """tuple of int: strides in elements (DLPack convention, not bytes)."""
        cdef int i
        if self._strides is None:
            self._strides = tuple([self.view.strides[i] for i in range(self.view.ndim)])
        return self._strides

    @property
    def dtype(self):
        """DType: data type (``code``, ``bits``, ``lanes``, ``name``)."""
        return dtype_object(self.view.dtype)

    @property
    def device(self):
        """tuple: ``(DLDeviceType, device_id)``, as ``__dlpack_device__``."""
        return device_tuple(self.view.device)

    @property
    def ndim(self):
        """int: number of dimensions."""
        return self.view.ndim

    @property
    def size(self):
        """int: number of elements."""
        return view_size(self.view)

    @property
    def itemsize(self):
        """int: bytes per element."""
        return dtype_itemsize(self.view.dtype)

    @property
    def nbytes(self):
        """int: ``size * itemsize``."""
        return view_size(self.view) * dtype_itemsize(self.view.dtype)

    @property
    def readonly(self):
        """bool: whether consumers must not write to the data."""
        return self.view.readonly

    @property
    def data_ptr(self):
        """int: ``DLTensor.data``, the base address (add ``byte_offset`` for the first element)."""
        return <uintptr_t>self.view.data

    @property
    def byte_offset(self):
        """int: bytes from ``data_ptr`` to the first element."""
        return self.view.byte_offset

    @property
    def c_contiguous(self):
        """bool: whether the elements are dense in C (row-major) order."""
        return is_c_contiguous(self.view)

    @property
    def f_contiguous(self):
        """bool: whether the elements are dense in Fortran (column-major) order."""
        return is_f_contiguous(self.view)

    def copy(self):
        """Return a C-contiguous, writable host copy as a new :class:`DLPackArray`."""
        cdef TensorView result
        owner = copy_to_heap(&self.view, &result)
        return wrap_view(&result, owner)

    def __len__(self):
        if self.view.ndim == 0:
            raise TypeError("len() of a 0-d DLPackArray")
        return self.view.shape[0]

    def __repr__(self):
        dev_type, dev_id = device_tuple(self.view.device)
        dev_name = dev_type.name.lower() if isinstance(dev_type, DLDeviceType) else str(dev_type)
        return (f"DLPackArray(shape={self.shape}, dtype={self.dtype.name}, "
                f"strides={self.strides}, device='{dev_name}:{dev_id}', "
                f"readonly={bool(self.view.readonly)})")


def from_dlpack(x, /, *, device=None, copy=None):
    """Consume a DLPack producer (or capsule) as a :class:`DLPackArray`.

    Follows the array API ``from_dlpack``: asks ``x.__dlpack__`` for a
    versioned capsule (``max_version=(1, 3)``), falls back to the legacy call
    for older producers, and passes ``dl_device``/``copy`` on.

    Parameters
    ----------
    x : object
        An object with ``__dlpack__``, or a DLPack capsule (consumed).
    device : None, "cpu" or (int, int), optional
        Target device; None keeps the producer's device.
    copy : bool or None, optional
        ``True`` always copies, ``False`` never copies, ``None`` copies only if needed.

    Returns
    -------
    DLPackArray

    Raises
    ------
    AttributeError
        If ``x`` has no ``__dlpack__`` method and is not a capsule.
    BufferError
        If the producer cannot export the data as requested.
    """
    cdef DLPackArray a = DLPackArray.__new__(DLPackArray)
    _import_into(a, x, copy, device, True)
    return a
