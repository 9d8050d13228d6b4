# cython: language_level=3
from dlpackarray.abi cimport DLManagedTensor, DLManagedTensorVersioned, DLPackExchangeAPI
from dlpackarray.core cimport TensorView


# Takes ownership of a managed tensor handed over in C and reads it into `out`;
# returns the owner (an adopted "used_dltensor*" capsule).  The one
# implementation behind the exchange API's to_py_object, the C API's
# from_managed_* and the exchange-API consumer.
cdef object view_from_managed_versioned(DLManagedTensorVersioned* m, TensorView* out,
                                        bint* copied)
cdef object view_from_managed_legacy(DLManagedTensor* m, TensorView* out)

# The DLPack C exchange API of type `t`, or NULL (looked up each call: the
# import caches it per type).
cdef const DLPackExchangeAPI* exchange_api_of(type t) except? NULL
# Imports `obj` through `api`; returns the owner, or None when the caller must
# use the Python __dlpack__ path instead (non-CPU data, producer refusal).
cdef object view_from_exchange(const DLPackExchangeAPI* api, object obj, TensorView* out,
                               bint* copied)

# This package's own table: static storage here, the functions are set by
# dlpackarray._capi when it is imported (they need the DLPackArray type).
cdef DLPackExchangeAPI* own_exchange_api() noexcept
