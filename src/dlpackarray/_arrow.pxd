# cython: language_level=3
# Arrow C data / stream / device interfaces (cpp/include/dlpackarray/arrow_abi.hpp)
# and the bridge to TensorView (arrow_bridge.hpp).
from libc.stdint cimport int32_t, int64_t
from libcpp cimport bool as cbool
from libcpp.string cimport string
from libcpp.vector cimport vector

from dlpackarray.abi cimport DLDataType, DLDevice
from dlpackarray.core cimport TensorView, raise_py_error


cdef extern from "dlpackarray/arrow_abi.hpp" nogil:
    ctypedef int32_t ArrowDeviceType

    struct ArrowSchema:
        const char* format
        const char* name
        const char* metadata
        int64_t flags
        int64_t n_children
        ArrowSchema** children
        ArrowSchema* dictionary
        void (*release)(ArrowSchema*) noexcept nogil
        void* private_data

    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
        void (*release)(ArrowArray*) noexcept nogil
        void* private_data

    struct ArrowDeviceArray:
        ArrowArray array
        int64_t device_id
        ArrowDeviceType device_type
        void* sync_event
        int64_t reserved[3]

    struct ArrowArrayStream:
        int (*get_schema)(ArrowArrayStream*, ArrowSchema*) noexcept nogil
        int (*get_next)(ArrowArrayStream*, ArrowArray*) noexcept nogil
        const char* (*get_last_error)(ArrowArrayStream*) noexcept nogil
        void (*release)(ArrowArrayStream*) noexcept nogil
        void* private_data

    struct ArrowDeviceArrayStream:
        ArrowDeviceType device_type
        int (*get_schema)(ArrowDeviceArrayStream*, ArrowSchema*) noexcept nogil
        int (*get_next)(ArrowDeviceArrayStream*, ArrowDeviceArray*) noexcept nogil
        const char* (*get_last_error)(ArrowDeviceArrayStream*) noexcept nogil
        void (*release)(ArrowDeviceArrayStream*) noexcept nogil
        void* private_data


cdef extern from "dlpackarray/arrow_abi.hpp" namespace "dla" nogil:
    const char* kCapsuleArrowSchema
    const char* kCapsuleArrowArray
    const char* kCapsuleArrowStream
    const char* kCapsuleArrowDeviceArray
    const char* kCapsuleArrowDeviceStream


cdef extern from "dlpackarray/arrow_bridge.hpp" namespace "dla" nogil:
    cdef cppclass ArrowExportOptions:
        cbool bit_packed_bool
        cbool nested_lists
        cbool requested_tensor
        int32_t copy
        int32_t device
        cbool schema_only

    cdef cppclass ArrowExport:
        pass

    void arrow_apply_request(const ArrowSchema& requested, const TensorView& v,
                             ArrowExportOptions* opts) except +raise_py_error
    ArrowExport* arrow_export_new(const TensorView& v,
                                  const ArrowExportOptions& opts) except +raise_py_error
    cbool arrow_export_shares_memory(const ArrowExport* ex)
    void arrow_export_set_keepalive(ArrowExport* ex, void (*release)(void*) noexcept, void* ctx)
    void arrow_export_unref(ArrowExport* ex)
    void arrow_export_schema(ArrowExport* ex, ArrowSchema* out) except +raise_py_error
    void arrow_export_array(ArrowExport* ex, ArrowArray* out) except +raise_py_error
    void arrow_export_device_array(ArrowExport* ex, ArrowDeviceArray* out) except +raise_py_error
    void arrow_export_stream(ArrowExport* ex, ArrowArrayStream* out) except +raise_py_error
    void arrow_export_device_stream(ArrowExport* ex,
                                    ArrowDeviceArrayStream* out) except +raise_py_error

    cdef cppclass ArrowTypeInfo:
        DLDataType dtype
        cbool bit_packed

    string arrow_describe(const ArrowTypeInfo& t) except +raise_py_error

    cdef cppclass ArrowBinding:
        TensorView view
        int64_t bit_offset
        cbool bit_packed

    void arrow_parse_schema(const ArrowSchema& s, ArrowTypeInfo* out) except +raise_py_error
    void arrow_bind_array(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev,
                          ArrowBinding* out) except +raise_py_error
    void arrow_bind_view(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev,
                         TensorView* view, int64_t* bit_offset) except +raise_py_error
    int64_t arrow_concat_layout(const ArrowTypeInfo& t, const vector[ArrowBinding]& chunks,
                                DLDevice dev, TensorView* out) except +raise_py_error
    void arrow_concat(const vector[ArrowBinding]& chunks, void* dst) except +raise_py_error


cdef extern from "dlpackarray/python_arrow_shim.hpp" namespace "dla::py":
    ctypedef enum ArrowCapsuleKind:
        kArrowSchemaCapsule
        kArrowArrayCapsule
        kArrowStreamCapsule
        kArrowDeviceArrayCapsule
        kArrowDeviceStreamCapsule

    object new_arrow_capsule(ArrowCapsuleKind kind, void** out)
    cppclass HeldArrowArray:
        ArrowDeviceArray device_array
    void release_arrow_keepalive(void* py_object) noexcept nogil


# Import: fills `out` from an object speaking the Arrow PyCapsule interface and
# returns the owner of the memory; `copied` says the data was concatenated or
# unpacked into a fresh copy.
# Which Arrow methods instances of t get from their class (a mask, 0: none);
# view_from_arrow takes the mask, so a caller that asked pays one lookup.
cdef int arrow_methods(type t) noexcept
# Arrow data whose __dlpack__ is not trusted: take the Arrow path first.
cdef bint arrow_path_first(type t) except -1
# The Arrow import's ValueError for obj (nulls), if any: for DLPack refusals.
cdef int raise_arrow_data_error(object obj) except -1
cdef object view_from_arrow(object obj, int methods, TensorView* out, bint* copied, object copy)

# Export of a view whose memory `owner` keeps alive.
cdef object export_arrow_schema(const TensorView* v)
cdef object export_arrow(const TensorView* v, object owner, object requested_schema,
                         object copy, bint device, bint stream, dict kwargs)
