/* dlpackarray.h and an official dlpack.h in one translation unit, in the
 * order selected by DLA_OFFICIAL_FIRST (after Python.h): either order compiles,
 * as C99, C11 and C++17, and the C API
 * is usable with whichever declarations won.  Compiled (C and C++, warnings
 * as errors) by tests/dlpack/test_abi_layout.py. */
#ifdef DLA_OFFICIAL_FIRST
/* Python.h comes before any standard header (CPython's rule: its pyconfig.h
 * selects the feature macros); dlpack.h includes <stdint.h>, so under strict
 * -std=c99 an official dlpack.h included before Python.h breaks Python.h. */
#include <Python.h>
#include <dlpack/dlpack.h>
#include "dlpackarray/dlpackarray.h"
#else
#include "dlpackarray/dlpackarray.h"
#include <dlpack/dlpack.h>
#endif

int uses_both(PyObject* array, DLManagedTensorVersioned* m, DLPackExchangeAPI* api);

int uses_both(PyObject* array, DLManagedTensorVersioned* m, DLPackExchangeAPI* api) {
  DLTensor t;
  int readonly = 0;
  if (DLPackArray_GetDLTensor(array, &t, &readonly) < 0) return -1;
  return (int)(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) + (api->header.version.major == 1) +
         (t.device.device_type == kDLCPU);
}
