/* dlpackarray.h and an official dlpack.h in one translation unit, in the
 * order selected by DLA_OFFICIAL_FIRST: either order compiles, and the C API
 * is usable with whichever declarations won.  Compiled (C and C++, warnings
 * as errors) by tests/test_abi_layout.py. */
#ifdef DLA_OFFICIAL_FIRST
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
