# cython: language_level=3
# CUDA support (docs/cuda.md): every driver call of the package goes through
# this module, so one copy of the C++ core holds the loaded driver table.
# It cimports no other dlpackarray module, so any of them may cimport it.
from dlpackarray.abi cimport DLDevice
from dlpackarray.core cimport TensorView


cdef class DeviceOwner:
    """Owns one device allocation (the result of a copy on the device)."""
    cdef unsigned long long ptr
    cdef int device_id
    # The copy's source memory (its owner), kept until the copy is known to
    # be complete: the copy is enqueued, not done, when the owner is made.
    cdef object source


cdef bint is_cuda_device(DLDevice d) noexcept
cdef bint is_cuda_stream_device(DLDevice d) noexcept
cdef int order_for_consumer(const TensorView* v, object stream) except -1
cdef int synchronize_for_host_read(const TensorView* v) except -1
cdef int wait_arrow_sync_event(DLDevice d, void* sync_event) except -1
cdef int copy_device_to_host_into(const TensorView* src, void* dst) except -1
cdef DeviceOwner copy_on_device_into(const TensorView* src, TensorView* dst, object source)
cdef object producer_stream_argument(object producer, object stream, object dl_device,
                                     bint host_only, int* pinned_device)
cdef int ready_after_request(TensorView* v, object stream_arg, int pinned_device) except -1
cdef int ready_after_bare_capsule(TensorView* v) except -1
cdef DeviceOwner copy_host_bytes_to_device(const void* src, Py_ssize_t nbytes, int device_id)
cdef int adopt_consumer_stream(TensorView* v, object stream, bint moved) except -1
cdef object view_from_cuda_array_interface(object obj, object iface, TensorView* out)
cdef dict export_cuda_array_interface(const TensorView* v, tuple shape)
