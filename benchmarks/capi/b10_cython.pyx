# cython: language_level=3, boundscheck=False, wraparound=False
# B10 timing loop in Cython (compiled as C): the same wrap -> export ->
# consume as loop_capi in b10_loops.c, written the way a Cython user would,
# through `cimport dlpackarray`.  benchmarks/cases_capi.py builds it.
from libc.stdint cimport int64_t

cimport dlpackarray
from dlpackarray cimport DLDataType, DLDevice, DLManagedTensorVersioned

dlpackarray.import_dlpackarray()

cdef double buf[1024]
cdef int64_t shape[1]
shape[0] = 1024


def loop_capi(Py_ssize_t n):
    cdef DLDataType f64
    f64.code, f64.bits, f64.lanes = dlpackarray.kDLFloat, 64, 1
    cdef DLDevice cpu
    cpu.device_type, cpu.device_id = dlpackarray.kDLCPU, 0
    cdef DLManagedTensorVersioned* m
    cdef Py_ssize_t _
    cdef bint ok
    for _ in range(n):
        a = dlpackarray.DLPackArray_FromData(buf, 1, shape, NULL, f64, cpu, 0, NULL, NULL, NULL)
        m = dlpackarray.DLPackArray_ToManagedVersioned(a)
        ok = m.dl_tensor.data == <void*>buf and m.dl_tensor.shape[0] == 1024
        m.deleter(m)
        if not ok:
            raise AssertionError("exported tensor does not describe the buffer")
        a = None
