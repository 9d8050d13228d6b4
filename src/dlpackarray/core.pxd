# cython: language_level=3
# Internal: the package's own modules use this; other projects use the C API
# (``cimport dlpackarray``, dlpackarray.h), whose ABI is versioned.  These
# symbols live in libdlpackarray_core.so, which is not meant to be linked
# from outside the package.
# Declarations of the C++ core (cpp/include/dlpackarray).  Every call that can
# fail is declared ``except +raise_py_error``: the single place where C++
# errors become Python exceptions (python_shim.cpp).
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.string cimport string
from cpython.object cimport PyObject

from dlpackarray.abi cimport (
    DLDataType, DLDevice, DLTensor, DLManagedTensor, DLManagedTensorVersioned,
)


cdef extern from "dlpackarray/python_shim.hpp" namespace "dla::py":
    cdef void raise_py_error()


cdef extern from "dlpackarray/dlpack_abi.hpp" namespace "dla" nogil:
    # The core's C++ names for DLPack constants (the ABI itself is abi.pxd).
    const uint32_t kDLPackMajorVersion
    const uint32_t kDLPackMinorVersion
    const uint64_t kFlagReadOnly
    const uint64_t kFlagIsCopied
    const uint64_t kFlagIsSubbyteTypePadded
    const char* kCapsuleLegacy
    const char* kCapsuleLegacyUsed
    const char* kCapsuleVersioned
    const char* kCapsuleVersionedUsed
    const char* kCapsuleExchangeApi


cdef extern from "dlpackarray/tensor_view.hpp" namespace "dla" nogil:
    const int32_t kMaxNdim

    const int32_t kInlineNdim

    cdef cppclass TensorView:
        # Assign ndim only through set_ndim(), which makes room for it.
        void set_ndim(int32_t n) except +raise_py_error
        void* data
        uint64_t byte_offset
        int32_t ndim
        DLDataType dtype
        DLDevice device
        cbool readonly
        void* ready_stream
        int64_t* shape
        int64_t* strides

    cdef cppclass Extent:
        int64_t lo
        int64_t hi
        int64_t size
        int64_t nbytes  # -1 when size * itemsize overflows int64

    Extent validate(const TensorView& v) except +raise_py_error
    Extent validate_within(const TensorView& v, const void* base,
                           int64_t length) except +raise_py_error
    int64_t view_size(const TensorView& v)
    # The byte count of copies, nbytes and Py_buffer.len (OverflowError).
    int64_t view_nbytes(const TensorView& v) except +raise_py_error
    cbool is_c_contiguous(const TensorView& v)
    cbool is_f_contiguous(const TensorView& v)
    # What a buffer export of an immutable view needs that does not depend on
    # the request: measured on the first export (measure_buffer_layout, which
    # also makes the byte strides unless given NULL; the caller checks host
    # access first), read by every later one.  Zeroed memory (tp_alloc)
    # reads "not known".
    cdef struct BufferLayout:
        cbool known
        cbool c_contiguous
        cbool f_contiguous
        const char* format  # PEP 3118 code, NULL if the dtype has none
        int64_t itemsize
        int64_t len  # -1: more than int64 bytes (the export raises OverflowError)
    void measure_buffer_layout(const TensorView& v, int64_t* byte_strides,
                               BufferLayout* out) except +raise_py_error
    void set_c_strides(TensorView& v)
    cbool stride_is_used(const TensorView& v, int32_t i)
    int64_t byte_stride(const TensorView& v, int32_t i) except +raise_py_error
    void set_strides_from_bytes(TensorView& v, const int64_t* byte_strides,
                                const char* source) except +raise_py_error
    cbool device_is_host_accessible(DLDevice d)
    cbool device_has_opaque_data(DLDevice d)
    void fold_byte_offset(TensorView& v)


cdef extern from "dlpackarray/rules.hpp" namespace "dla" nogil:
    # The shared request rules (rules.hpp): use these, never a local copy.
    ctypedef enum CopyMode "dla::CopyMode":
        kCopyIfNeeded "dla::CopyMode::kIfNeeded"
        kCopyNever "dla::CopyMode::kNever"
        kCopyAlways "dla::CopyMode::kAlways"
    ctypedef enum Side "dla::Side":
        kConsumer "dla::Side::kConsumer"
        kProducer "dla::Side::kProducer"

    string device_text(DLDevice d) except +raise_py_error
    void require_host_memory(DLDevice d, const char* action) except +raise_py_error
    ctypedef enum DeviceRoute "dla::DeviceRoute":
        kRouteSame "dla::DeviceRoute::kSame"
        kRouteRelabelHost "dla::DeviceRoute::kRelabelHost"
        kRouteCopyToHost "dla::DeviceRoute::kCopyToHost"
    DeviceRoute route_device_request(DLDevice have, DLDevice want, CopyMode copy,
                                     Side side) except +raise_py_error


cdef extern from "dlpackarray/dtype.hpp" namespace "dla" nogil:
    cbool dtype_equal(DLDataType a, DLDataType b)
    int64_t dtype_itemsize(DLDataType dt) except +raise_py_error
    cbool dtype_is_supported(DLDataType dt)
    void check_dtype_supported(DLDataType dt) except +raise_py_error
    string supported_dtypes_text() except +raise_py_error
    string dtype_name(DLDataType dt) except +raise_py_error
    DLDataType dtype_from_name(const string& name) except +raise_py_error
    DLDataType dtype_from_pep3118(const char* fmt, int64_t itemsize) except +raise_py_error
    const char* pep3118_from_dtype(DLDataType dt)
    DLDataType dtype_from_typestr(const char* typestr) except +raise_py_error
    string typestr_from_dtype(DLDataType dt) except +raise_py_error


cdef extern from "dlpackarray/strided_copy.hpp" namespace "dla" nogil:
    void strided_copy_to_contiguous(const TensorView& src, void* dst) except +raise_py_error
    void* aligned_allocate(int64_t nbytes) except +raise_py_error
    void aligned_free(void* p)
    void advise_huge_pages(void* p, int64_t nbytes)


cdef extern from "dlpackarray/managed_tensor.hpp" namespace "dla" nogil:
    void view_from_dltensor(const DLTensor& t, TensorView* out) except +raise_py_error
    void view_from_managed(const DLManagedTensorVersioned& m, TensorView* out,
                           cbool* copied) except +raise_py_error
    void view_from_managed(const DLManagedTensor& m, TensorView* out) except +raise_py_error


cdef extern from "dlpackarray/python_shim.hpp" namespace "dla::py":
    # Return new references (NULL with an exception set on failure).
    object new_versioned_capsule(const TensorView& v, uint64_t flags, PyObject* owner)
    object new_legacy_capsule(const TensorView& v, PyObject* owner)
    DLManagedTensorVersioned* new_versioned_managed(const TensorView& v, uint64_t flags,
                                                    PyObject* owner) except NULL
    cbool consume_dlpack_capsule(object capsule, TensorView* out,
                                 cbool* copied) except +raise_py_error
    object adopt_managed_versioned(DLManagedTensorVersioned* m)
    object adopt_managed_legacy(DLManagedTensor* m)
    void release_adopted_capsule(object capsule) noexcept
    void release_reference(PyObject* obj) noexcept
    int install_shutdown_gate() except -1
    void call_versioned_deleter(DLManagedTensorVersioned* m) noexcept
    void call_legacy_deleter(DLManagedTensor* m) noexcept
