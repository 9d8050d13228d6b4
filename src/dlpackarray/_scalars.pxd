# cython: language_level=3
from libc.stdint cimport int32_t, int64_t, uint64_t

from dlpackarray.abi cimport DLDataType
from dlpackarray.core cimport TensorView, raise_py_error


cdef extern from "dlpackarray/scalar.hpp" namespace "dla" nogil:
    cdef cppclass Scalar:
        int32_t kind
        int64_t i
        uint64_t u
        double real
        double imag

    const int32_t kScalarBool "dla::Scalar::kBool"
    const int32_t kScalarInt "dla::Scalar::kInt"
    const int32_t kScalarUInt "dla::Scalar::kUInt"
    const int32_t kScalarFloat "dla::Scalar::kFloat"
    const int32_t kScalarComplex "dla::Scalar::kComplex"

    Scalar load_scalar(DLDataType dt, const void* p) except +raise_py_error
    const void* element_address(const TensorView& v, const int64_t* index) except +raise_py_error
    int64_t normalize_index(const TensorView& v, int32_t axis, int64_t i) except +raise_py_error
    void unravel_flat_index(const TensorView& v, int64_t flat,
                            int64_t* index) except +raise_py_error


# The elements of a view as Python objects (bool, int, float, complex), read
# straight from host memory; BufferError for device memory.
cdef object item_of(const TensorView* v, tuple args)
cdef object tolist_of(const TensorView* v)
cdef bint contains_of(const TensorView* v, object value) except -1
# The 0-d conversions, with NumPy 2's rules on which arrays may convert.
cdef object scalar_of(const TensorView* v)
cdef object index_of(const TensorView* v)
cdef bint truth_of(const TensorView* v) except -1
