# The body of the two Cython examples: consumer_c.pyx (compiled as C) and
# consumer_cpp.pyx (compiled as C++) include it.  Every function of the C API
# is used; tests/capi/test_c_api_downstream.py builds both and calls each function.
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer, Py_buffer
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

cimport dlpackarray
from dlpackarray cimport DLDataType, DLDevice, DLManagedTensor, DLPackArray, DLTensor

# Load the C API table once, when this module is imported.
dlpackarray.import_dlpackarray()

# How many blocks the deleters below have freed (read from Python).
cdef int freed = 0


def freed_count():
    return freed


def api_version():
    return (dlpackarray.DLPACKARRAY_C_API_MAJOR, dlpackarray.DLPACKARRAY_C_API_MINOR)


def is_array(obj):
    return dlpackarray.DLPackArray_Check(obj)


def is_array_type(obj):
    # The opaque type works for isinstance and typed arguments.
    return isinstance(obj, DLPackArray)


def type_object():
    return <object>dlpackarray.DLPackArray_Type()


def wrap(obj, copy=None):
    """DLPackArray(obj, copy=copy) from C."""
    cdef int c = dlpackarray.DLPACKARRAY_COPY_IF_NEEDED
    if copy is not None:
        c = dlpackarray.DLPACKARRAY_COPY_ALWAYS if copy else dlpackarray.DLPACKARRAY_COPY_NEVER
    return dlpackarray.DLPackArray_FromObject(obj, c, NULL)


def describe(obj):
    """Borrow the DLTensor: (ndim, shape, strides, (code, bits), readonly, data + offset)."""
    cdef DLTensor t
    cdef int readonly
    dlpackarray.DLPackArray_GetDLTensor(obj, &t, &readonly)
    shape = tuple([t.shape[i] for i in range(t.ndim)])
    strides = tuple([t.strides[i] for i in range(t.ndim)])
    return (t.ndim, shape, strides, (t.dtype.code, t.dtype.bits), bool(readonly),
            <size_t>t.data + t.byte_offset)


cdef void free_block(void* block) noexcept:
    global freed
    free(block)
    freed += 1


def arange_float64(Py_ssize_t n):
    """A new array over malloc'd memory that a C deleter frees."""
    cdef double* data = <double*>malloc(max(n, 1) * sizeof(double))
    if data == NULL:
        raise MemoryError()
    for i in range(n):
        data[i] = i
    cdef int64_t shape[1]
    shape[0] = n
    cdef DLDataType dtype
    dtype.code, dtype.bits, dtype.lanes = dlpackarray.kDLFloat, 64, 1
    cdef DLDevice cpu
    cpu.device_type, cpu.device_id = dlpackarray.kDLCPU, 0
    return dlpackarray.DLPackArray_FromData(data, 1, shape, NULL, dtype, cpu, 0, NULL,
                                            free_block, data)


def bad_shape_with_deleter():
    """A failing call still runs the deleter it was given (ownership passed)."""
    cdef void* data = malloc(8)
    cdef int64_t shape[1]
    shape[0] = -1
    cdef DLDataType dtype
    dtype.code, dtype.bits, dtype.lanes = dlpackarray.kDLUInt, 8, 1
    cdef DLDevice cpu
    cpu.device_type, cpu.device_id = dlpackarray.kDLCPU, 0
    return dlpackarray.DLPackArray_FromData(data, 1, shape, NULL, dtype, cpu, 0, NULL,
                                            free_block, data)


def columns_of(owner, Py_ssize_t rows, Py_ssize_t cols):
    """A read-only strided view (every other column) of a writable buffer that
    ``owner`` keeps alive, described with element strides."""
    cdef Py_buffer buf
    PyObject_GetBuffer(owner, &buf, PyBUF_WRITABLE)
    cdef void* data = buf.buf
    cdef Py_ssize_t length = buf.len
    PyBuffer_Release(&buf)
    if length < rows * cols * 4:
        raise ValueError("buffer too small")
    cdef int64_t shape[2]
    cdef int64_t strides[2]
    shape[0], shape[1] = rows, (cols + 1) // 2
    strides[0], strides[1] = cols, 2
    cdef DLDataType dtype
    dtype.code, dtype.bits, dtype.lanes = dlpackarray.kDLInt, 32, 1
    cdef DLDevice cpu
    cpu.device_type, cpu.device_id = dlpackarray.kDLCPU, 0
    return dlpackarray.DLPackArray_FromData(data, 2, shape, strides, dtype, cpu, 1,
                                            <PyObject*>owner, NULL, NULL)


def through_managed(DLPackArray a):
    """Export an owning managed tensor and hand it to a new array (ownership moves)."""
    m = dlpackarray.DLPackArray_ToManagedVersioned(a)
    return (m.flags, dlpackarray.DLPackArray_FromManagedVersioned(m))


cdef void free_legacy(DLManagedTensor* self) noexcept:
    global freed
    free(self.dl_tensor.data)
    free(self)
    freed += 1


def legacy_int16(Py_ssize_t n, bint valid=True):
    """A legacy DLManagedTensor built in C, adopted by a DLPackArray."""
    cdef DLManagedTensor* m = <DLManagedTensor*>malloc(sizeof(DLManagedTensor) + sizeof(int64_t))
    cdef short* data = <short*>malloc(max(n, 1) * sizeof(short))
    for i in range(n):
        data[i] = <short>(-i)
    m.dl_tensor.data = data
    m.dl_tensor.device.device_type = dlpackarray.kDLCPU
    m.dl_tensor.device.device_id = 0
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = \
        dlpackarray.kDLInt, 16, 1
    m.dl_tensor.shape = <int64_t*>(m + 1)
    # A negative length makes the import fail: the deleter must still run.
    m.dl_tensor.shape[0] = n if valid else -n
    m.dl_tensor.strides = NULL  # legacy producers may omit strides (compact)
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = NULL
    m.deleter = free_legacy
    return dlpackarray.DLPackArray_FromManagedLegacy(m)


def capsule(a, bint versioned):
    return dlpackarray.DLPackArray_ToCapsule(a, versioned)


# -- C API 1.1 ------------------------------------------------------------------------

def empty_float32(Py_ssize_t rows, Py_ssize_t cols, int device_type=dlpackarray.kDLCPU):
    """A new C-contiguous rows x cols float32 array (uninitialised)."""
    cdef int64_t shape[2]
    shape[0], shape[1] = rows, cols
    cdef DLDataType dtype
    dtype.code, dtype.bits, dtype.lanes = dlpackarray.kDLFloat, 32, 1
    cdef DLDevice device
    device.device_type, device.device_id = <dlpackarray.DLDeviceType>device_type, 0
    return dlpackarray.DLPackArray_Empty(2, shape, dtype, device)


def contiguity(obj):
    """(C-contiguous, F-contiguous) of a DLPackArray."""
    return (bool(dlpackarray.DLPackArray_IsContiguous(obj, b'C')),
            bool(dlpackarray.DLPackArray_IsContiguous(obj, b'F')))


def bad_order(obj):
    return dlpackarray.DLPackArray_IsContiguous(obj, b'X')


def c_contiguous(obj):
    """obj itself when C-contiguous, else a C-contiguous copy on its device."""
    return dlpackarray.DLPackArray_AsContiguous(obj)


def convert(obj):
    """What DLPackArray_Converter stores for obj (the "O&" converter, called directly)."""
    cdef PyObject* out = NULL
    cdef int r = dlpackarray.DLPackArray_Converter(<PyObject*>obj, &out)  # raises on 0
    result = <object>out
    Py_DECREF(result)  # the converter's new reference, now held by `result`
    # The cleanup call (obj NULL) drops a stored reference and clears the slot.
    Py_INCREF(result)
    dlpackarray.DLPackArray_Converter(NULL, &out)
    return r, result, out == NULL


def wrap_on_stream(obj, long long stream):
    return dlpackarray.DLPackArray_FromObjectOnStream(
        obj, dlpackarray.DLPACKARRAY_COPY_IF_NEEDED, NULL, stream)
