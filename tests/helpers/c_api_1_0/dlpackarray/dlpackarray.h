/* The public C API of dlpackarray (valid C99 and C++).
 *
 * A versioned table of function pointers published by the installed package
 * as the capsule `dlpackarray._C_API` (NumPy's _ARRAY_API model).  Include
 * this header with `dlpackarray.get_include()` on the include path; call
 * import_dlpackarray() once per translation unit (the wrappers below also do
 * it on first use).  Only the Python headers are needed to build against it:
 * nothing is linked, and DLPackArray's C++ layout is not part of the API.
 *
 * Conventions (CPython's): functions returning a pointer return NULL, those
 * returning int return -1, each with a Python exception set; no C++
 * exception ever crosses the table.  A NULL where an object or an output
 * pointer is required fails the call that way too: the exception already
 * set stays (a NULL object usually comes from a call that failed), else a
 * SystemError names the function and the argument.  DLPackArray_Check is the
 * exception: 1 or 0, and 0 for NULL.  Every function needs the GIL.
 * See docs/c_api.md.
 */
#ifndef DLPACKARRAY_DLPACKARRAY_H_
#define DLPACKARRAY_DLPACKARRAY_H_

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

/* ---- DLPack 1.3 ABI, in C ---------------------------------------------------
 * When an official dlpack.h was included before this header, its
 * declarations are used (DLPACK_DLPACK_H_ is its include guard).  Otherwise
 * the ABI is declared here, field for field the same layout (tests/helpers/abi checks
 * it against an official header), and the guard is defined so that an
 * official dlpack.h included afterwards adds nothing conflicting. */
#if defined(DLPACK_DLPACK_H_)
#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1 || DLPACK_MINOR_VERSION < 3
#error "dlpackarray.h needs DLPack 1.x with x >= 3; an older dlpack.h was included first"
#endif
#else
#define DLPACK_DLPACK_H_
#define DLPACKARRAY_DECLARES_DLPACK 1
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; non-NULL when ndim != 0 (DLPack >= 1.2) */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

typedef int (*DLPackManagedTensorAllocator)(DLTensor* prototype, DLManagedTensorVersioned** out,
                                            void* error_ctx,
                                            void (*SetError)(void* error_ctx, const char* kind,
                                                             const char* message));
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object,
                                                     DLManagedTensorVersioned** out);
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor,
                                                   void** out_py_object);
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void** out_current_stream);

typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* DLPACK_DLPACK_H_ */

/* ---- The dlpackarray C API -------------------------------------------------- */
#ifdef __cplusplus
extern "C" {
#endif

/* Same major: compatible.  A newer minor only appends members to the table,
 * so a module built with this header needs a table of the same major and at
 * least this minor; import_dlpackarray() refuses anything else. */
#define DLPACKARRAY_C_API_MAJOR 1
#define DLPACKARRAY_C_API_MINOR 0
#define DLPACKARRAY_C_API_CAPSULE "dlpackarray._C_API"

/* The `copy` argument of DLPackArray_FromObject (Python's copy=None/False/True). */
#define DLPACKARRAY_COPY_IF_NEEDED (-1)
#define DLPACKARRAY_COPY_NEVER 0
#define DLPACKARRAY_COPY_ALWAYS 1

/* What a DLPackArray is to C: a Python object.  Only the object header is
 * declared (Cython's `ctypedef class` needs a struct name); the rest of the
 * layout is private and may change in any release. */
typedef struct {
  PyObject_HEAD
} DLPackArrayObject;

/* Releases memory wrapped by DLPackArray_FromData; called exactly once, with
 * the GIL held, when the last array, view, capsule or consumer using the
 * memory is gone (or at once when DLPackArray_FromData fails). */
typedef void (*DLPackArray_DataDeleter)(void* ctx);

typedef struct DLPackArray_CAPI {
  uint32_t major;
  uint32_t minor;
  size_t size; /* sizeof(DLPackArray_CAPI) as the package built it */

  PyTypeObject* type; /* dlpackarray.DLPackArray */
  /* 1 when obj is a DLPackArray (or a subclass), else 0 (also for NULL);
   * never fails and never touches the error indicator. */
  int (*check)(PyObject* obj);
  /* DLPackArray(obj, copy=..., device=...): same protocol precedence and
   * rules.  copy: DLPACKARRAY_COPY_*; device: NULL for None, else as the
   * Python argument.  New reference. */
  PyObject* (*from_object)(PyObject* obj, int copy, PyObject* device);
  /* Wraps memory described in DLPack terms.  shape[ndim]; strides[ndim] in
   * elements, or NULL for C-contiguous; data is the first element.  The
   * memory is kept alive by `owner` (a new reference is taken) or released
   * by deleter(deleter_ctx), never both; with neither the caller keeps it
   * alive for as long as anything uses it.  The deleter is owned from the
   * call on: it runs even when the call fails. */
  PyObject* (*from_data)(void* data, int32_t ndim, const int64_t* shape, const int64_t* strides,
                         DLDataType dtype, DLDevice device, int readonly, PyObject* owner,
                         DLPackArray_DataDeleter deleter, void* deleter_ctx);
  /* Takes ownership of a managed tensor (its deleter runs once, when the
   * array and everything using it is gone, or at once on failure). */
  PyObject* (*from_managed_versioned)(DLManagedTensorVersioned* tensor);
  PyObject* (*from_managed_legacy)(DLManagedTensor* tensor);
  /* Borrows the description of `array`: out->shape/strides point into the
   * array and stay valid while it lives (a DLPackArray never changes).
   * *readonly (if not NULL) receives the read-only flag.  0, or -1 with
   * TypeError for a non-DLPackArray. */
  int (*get_dltensor)(PyObject* array, DLTensor* out, int* readonly);
  /* New owning tensor (version 1.3, READ_ONLY flag set for read-only data)
   * that keeps `array`'s memory alive until its deleter is called. */
  DLManagedTensorVersioned* (*to_managed_versioned)(PyObject* array);
  /* array.__dlpack__(max_version=(1, 3)) if versioned, else the legacy capsule. */
  PyObject* (*to_capsule)(PyObject* array, int versioned);
} DLPackArray_CAPI;

/* One table pointer per translation unit, as NumPy does.  Define
 * DLPACKARRAY_API_NAME before including to rename it. */
#ifndef DLPACKARRAY_API_NAME
#define DLPACKARRAY_API_NAME DLPackArray_API
#endif
static const DLPackArray_CAPI* DLPACKARRAY_API_NAME = NULL;

/* Replaces the pending exception, if any, by an ImportError "<message>: <Type>:
 * <text>" whose __cause__ is the replaced one; returns -1. */
static inline int dlpackarray_import_error_(PyObject* message) {
  PyObject* cause = NULL;
  PyObject* exc = NULL;
  if (message == NULL) return -1; /* MemoryError set */
#if PY_VERSION_HEX >= 0x030C0000
  cause = PyErr_GetRaisedException();
#else
  {
    PyObject *type, *tb;
    PyErr_Fetch(&type, &cause, &tb);
    PyErr_NormalizeException(&type, &cause, &tb);
    if (cause != NULL && tb != NULL) PyException_SetTraceback(cause, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
  }
#endif
  if (cause == NULL) {
    PyErr_SetObject(PyExc_ImportError, message);
  } else {
    PyErr_Format(PyExc_ImportError, "%U: %s: %S", message, Py_TYPE(cause)->tp_name, cause);
  }
  Py_DECREF(message);
  if (cause == NULL) return -1;
#if PY_VERSION_HEX >= 0x030C0000
  exc = PyErr_GetRaisedException();
  PyException_SetCause(exc, cause); /* steals cause */
  PyErr_SetRaisedException(exc);
#else
  {
    PyObject *type, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL) {
      PyException_SetCause(exc, cause); /* steals cause */
    } else {
      Py_DECREF(cause);
    }
    PyErr_Restore(type, exc, tb);
  }
#endif
  return -1;
}

/* A function, not an inline comparison: `minor < 0` for this header's minor
 * would be a -Wtype-limits warning in the consumer's build. */
static inline int dlpackarray_older_minor_(uint32_t found, uint32_t needed) {
  return found < needed;
}

/* Loads the table: 0, or -1 with ImportError set, naming the version this
 * module was built for and the one found, when the dlpackarray module or its
 * table cannot be loaded, the major versions differ, the table's minor is
 * older than this header's, or the table is shorter than this header's
 * (an inconsistent installation). */
static inline int import_dlpackarray(void) {
  const DLPackArray_CAPI* api;
  if (DLPACKARRAY_API_NAME != NULL) return 0;
  api = (const DLPackArray_CAPI*)PyCapsule_Import(DLPACKARRAY_C_API_CAPSULE, 0);
  if (api == NULL) {
    return dlpackarray_import_error_(PyUnicode_FromFormat(
        "this module needs the dlpackarray C API %d.%d, but its table (the capsule %s) cannot "
        "be loaded",
        DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR, DLPACKARRAY_C_API_CAPSULE));
  }
  if (api->major != DLPACKARRAY_C_API_MAJOR) {
    return dlpackarray_import_error_(PyUnicode_FromFormat(
        "this module was built for the dlpackarray C API %d.%d, but the installed dlpackarray "
        "provides %u.%u (another major version); rebuild the module against it",
        DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR, (unsigned)api->major,
        (unsigned)api->minor));
  }
  if (dlpackarray_older_minor_(api->minor, DLPACKARRAY_C_API_MINOR)) {
    return dlpackarray_import_error_(PyUnicode_FromFormat(
        "this module was built for the dlpackarray C API %d.%d, but the installed dlpackarray "
        "provides the older %u.%u; upgrade dlpackarray",
        DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR, (unsigned)api->major,
        (unsigned)api->minor));
  }
  if (api->size < sizeof(DLPackArray_CAPI)) {
    /* A minor that claims what the size denies: a broken installation. */
    return dlpackarray_import_error_(PyUnicode_FromFormat(
        "this module was built for the dlpackarray C API %d.%d (a %zu-byte table), but the "
        "installed dlpackarray's table %u.%u has only %zu bytes; reinstall dlpackarray",
        DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR, sizeof(DLPackArray_CAPI),
        (unsigned)api->major, (unsigned)api->minor, api->size));
  }
  DLPACKARRAY_API_NAME = api;
  return 0;
}

/* Every wrapper loads the table on first use, so a module that skipped
 * import_dlpackarray() still works; if the load fails, the wrapper returns its
 * error value with the ImportError set. */
#define DLPACKARRAY_ENSURE_(fail) \
  if (DLPACKARRAY_API_NAME == NULL && import_dlpackarray() < 0) return fail

/* The C API as functions. */
static inline PyTypeObject* DLPackArray_Type(void) {
  DLPACKARRAY_ENSURE_(NULL);
  return DLPACKARRAY_API_NAME->type;
}
/* 1 or 0, and never an error once the table is loaded.  Called before a
 * successful import_dlpackarray(), it loads the table; if that fails it
 * returns 0 *with the ImportError set* (a Check cannot return an error value,
 * and clearing it would hide the mismatch): the caller's next error check, or
 * CPython's "returned a result with an exception set", reports it.  Call
 * import_dlpackarray() at module initialisation and this never happens. */
static inline int DLPackArray_Check(PyObject* obj) {
  DLPACKARRAY_ENSURE_(0);
  return DLPACKARRAY_API_NAME->check(obj);
}
static inline PyObject* DLPackArray_FromObject(PyObject* obj, int copy, PyObject* device) {
  DLPACKARRAY_ENSURE_(NULL);
  return DLPACKARRAY_API_NAME->from_object(obj, copy, device);
}
static inline PyObject* DLPackArray_FromData(void* data, int32_t ndim, const int64_t* shape,
                                             const int64_t* strides, DLDataType dtype,
                                             DLDevice device, int readonly, PyObject* owner,
                                             DLPackArray_DataDeleter deleter, void* deleter_ctx) {
  if (DLPACKARRAY_API_NAME == NULL && import_dlpackarray() < 0) {
    if (deleter != NULL) deleter(deleter_ctx); /* owned from the call on */
    return NULL;
  }
  return DLPACKARRAY_API_NAME->from_data(data, ndim, shape, strides, dtype, device, readonly, owner,
                                         deleter, deleter_ctx);
}
static inline PyObject* DLPackArray_FromManagedVersioned(DLManagedTensorVersioned* tensor) {
  if (DLPACKARRAY_API_NAME == NULL && import_dlpackarray() < 0) {
    if (tensor != NULL && tensor->deleter != NULL) tensor->deleter(tensor);
    return NULL;
  }
  return DLPACKARRAY_API_NAME->from_managed_versioned(tensor);
}
static inline PyObject* DLPackArray_FromManagedLegacy(DLManagedTensor* tensor) {
  if (DLPACKARRAY_API_NAME == NULL && import_dlpackarray() < 0) {
    if (tensor != NULL && tensor->deleter != NULL) tensor->deleter(tensor);
    return NULL;
  }
  return DLPACKARRAY_API_NAME->from_managed_legacy(tensor);
}
static inline int DLPackArray_GetDLTensor(PyObject* array, DLTensor* out, int* readonly) {
  DLPACKARRAY_ENSURE_(-1);
  return DLPACKARRAY_API_NAME->get_dltensor(array, out, readonly);
}
static inline DLManagedTensorVersioned* DLPackArray_ToManagedVersioned(PyObject* array) {
  DLPACKARRAY_ENSURE_(NULL);
  return DLPACKARRAY_API_NAME->to_managed_versioned(array);
}
static inline PyObject* DLPackArray_ToCapsule(PyObject* array, int versioned) {
  DLPACKARRAY_ENSURE_(NULL);
  return DLPACKARRAY_API_NAME->to_capsule(array, versioned);
}

#undef DLPACKARRAY_ENSURE_

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPACKARRAY_DLPACKARRAY_H_ */
