/* B9's DLPack import floors: DLPackBufferWrap and DLPackSpecWrap
 * (b9_floor_module.c: what each one measures). */
#include "b9_floor.h"

/* -- DLPack buffer wrapper ------------------------------------------------ */

#define WRAP_MAX_NDIM 8

/* Built once in the module's init: the call costs no allocation. */
PyObject* b9_dlpack_name;        /* "__dlpack__" */
PyObject* b9_dlpack_kwnames;     /* ("max_version",) */
PyObject* b9_dlpack_max_version; /* (1, 3) */
PyObject* b9_dlpack_device_name; /* "__dlpack_device__" */

/* shape and strides (in bytes) live in the wrapper, filled per request:
 * Py_buffer's are Py_ssize_t, DLPack's strides count elements. */
typedef struct {
  PyObject_HEAD PyObject* capsule; /* renamed: the deleter is ours to call */
  DLManagedTensorVersioned* tensor;
  Py_ssize_t shape[WRAP_MAX_NDIM];
  Py_ssize_t strides[WRAP_MAX_NDIM];
} DLPackBufferWrap;

/* The struct-module format of a host dtype of whole bytes, or NULL. */
static const char* dl_format(DLDataType t) {
  static const char* const kInt[] = {"b", "h", "i", "q"};
  static const char* const kUInt[] = {"B", "H", "I", "Q"};
  static const char* const kFloat[] = {NULL, "e", "f", "d"};
  int i = t.bits == 8 ? 0 : t.bits == 16 ? 1 : t.bits == 32 ? 2 : t.bits == 64 ? 3 : -1;
  if (i < 0 || t.lanes != 1) return NULL;
  switch (t.code) {
    case 0: return kInt[i];
    case 1: return kUInt[i];
    case 2: return kFloat[i];
    case 6: return i == 0 ? "?" : NULL;
    default: return NULL;
  }
}

static int wrap_getbuffer(DLPackBufferWrap* self, Py_buffer* view, int flags) {
  const DLTensor* t = &self->tensor->dl_tensor;
  const char* format = dl_format(t->dtype);
  if (format == NULL || t->ndim < 0 || t->ndim > WRAP_MAX_NDIM) {
    PyErr_SetString(PyExc_BufferError, "DLPackBufferWrap: unsupported dtype or ndim");
    view->obj = NULL;
    return -1;
  }
  int readonly = (self->tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (readonly && (flags & PyBUF_WRITABLE)) {
    PyErr_SetString(PyExc_BufferError, "DLPackBufferWrap: the tensor is read-only");
    view->obj = NULL;
    return -1;
  }
  Py_ssize_t itemsize = t->dtype.bits / 8;
  Py_ssize_t step = itemsize; /* the C-contiguous stride of the dimension */
  int contiguous = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    self->shape[i] = (Py_ssize_t)t->shape[i];
    self->strides[i] = t->strides != NULL ? (Py_ssize_t)t->strides[i] * itemsize : step;
    contiguous &= self->strides[i] == step || self->shape[i] == 1;
    step *= self->shape[i];
  }
  /* A request without strides promises the consumer C-contiguous memory. */
  if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contiguous) {
    PyErr_SetString(PyExc_BufferError, "DLPackBufferWrap: not C-contiguous");
    view->obj = NULL;
    return -1;
  }
  view->buf = (char*)t->data + t->byte_offset;
  view->obj = Py_NewRef(self);
  view->len = step;
  view->readonly = readonly;
  view->itemsize = itemsize;
  view->format = (flags & PyBUF_FORMAT) ? (char*)format : NULL;
  view->ndim = t->ndim;
  view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

/* The device a producer's __dlpack_device__ reports, or -1 with an error
 * set: the spec's (device_type, device_id) pair of ints. */
static int query_device(PyObject* obj, DLDevice* out) {
  PyObject* call[2] = {NULL, obj};
  PyObject* dev = PyObject_VectorcallMethod(b9_dlpack_device_name, call + 1,
                                            1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  if (dev == NULL) return -1;
  if (!PyTuple_Check(dev) || PyTuple_GET_SIZE(dev) != 2) {
    Py_DECREF(dev);
    PyErr_SetString(PyExc_TypeError, "__dlpack_device__ must return a 2-tuple");
    return -1;
  }
  long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
  long id = type == -1 && PyErr_Occurred() ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
  Py_DECREF(dev);
  if (PyErr_Occurred()) return -1;
  out->device_type = (DLDeviceType)type;
  out->device_id = (int32_t)id;
  return 0;
}

/* What the spec consumer checks of the capsule's tensor (name and pointer
 * already checked by PyCapsule_GetPointer): NULL when it is accepted. */
static const char* spec_refusal(const DLManagedTensorVersioned* tensor, DLDevice device) {
  const DLTensor* t = &tensor->dl_tensor;
  if (tensor->version.major != DLPACK_MAJOR_VERSION)
    return "DLPackSpecWrap: unsupported DLPack major version";
  if (t->device.device_type != device.device_type || t->device.device_id != device.device_id)
    return "DLPackSpecWrap: the capsule's device is not the one __dlpack_device__ reported";
  if (t->ndim < 0 || t->ndim > WRAP_MAX_NDIM || dl_format(t->dtype) == NULL)
    return "DLPackSpecWrap: unsupported dtype, lanes or ndim";
  return NULL;
}

/* Both wrappers: one vectorcall of obj.__dlpack__ (the spec consumer asks
 * obj.__dlpack_device__ first and checks the tensor it gets). */
static PyObject* make_wrap(PyTypeObject* type, PyObject* obj) {
  const int spec = type == &b9_DLPackSpecWrapType;
  DLDevice device;
  if (spec) {
    if (query_device(obj, &device) != 0) return NULL;
    if (device.device_type != kDLCPU) {
      /* A device consumer would pass its stream here (CUDA: 1, the legacy
       * stream, when it has none); this floor measures host data only. */
      PyErr_SetString(PyExc_BufferError, "DLPackSpecWrap: host (CPU) data only");
      return NULL;
    }
  }
  /* call[0] is the scratch slot PY_VECTORCALL_ARGUMENTS_OFFSET lends. */
  PyObject* call[3] = {NULL, obj, b9_dlpack_max_version};
  PyObject* capsule = PyObject_VectorcallMethod(
      b9_dlpack_name, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, b9_dlpack_kwnames);
  if (capsule == NULL) return NULL;
  DLManagedTensorVersioned* tensor = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  const char* refusal = tensor != NULL && spec ? spec_refusal(tensor, device) : NULL;
  /* Allocated before the rename: until then the producer's capsule
   * destructor still frees the tensor (a refused one included). */
  DLPackBufferWrap* self =
      tensor == NULL || refusal != NULL ? NULL : PyObject_New(DLPackBufferWrap, type);
  if (self == NULL) {
    if (refusal != NULL) PyErr_SetString(PyExc_BufferError, refusal);
    Py_DECREF(capsule);
    return NULL;
  }
  if (PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
    PyObject_Free(self); /* never initialised: not deallocated */
    Py_DECREF(capsule);
    return NULL;
  }
  self->capsule = capsule;
  self->tensor = tensor;
  return (PyObject*)self;
}

/* The DLPack wrapper types called through their vectorcall: no argument tuple. */
static PyObject* wrap_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) {
  PyObject* obj = b9_only_argument(type, args, nargsf, kwnames);
  return obj == NULL ? NULL : make_wrap((PyTypeObject*)type, obj);
}

/* The same for calls that bring an argument tuple (PyObject_Call). */
static PyObject* wrap_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  PyObject* obj = b9_only_item(type, args, kw);
  return obj == NULL ? NULL : make_wrap(type, obj);
}

static void wrap_dealloc(DLPackBufferWrap* self) {
  if (self->tensor->deleter != NULL) self->tensor->deleter(self->tensor);
  Py_DECREF(self->capsule);
  PyObject_Free(self);
}

static PyBufferProcs wrap_as_buffer = {
    .bf_getbuffer = (getbufferproc)wrap_getbuffer,
};

PyTypeObject b9_DLPackBufferWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.DLPackBufferWrap",
    .tp_basicsize = sizeof(DLPackBufferWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = wrap_new,
    .tp_vectorcall = wrap_vectorcall,
    .tp_dealloc = (destructor)wrap_dealloc,
    .tp_as_buffer = &wrap_as_buffer,
};

PyTypeObject b9_DLPackSpecWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.DLPackSpecWrap",
    .tp_basicsize = sizeof(DLPackBufferWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = wrap_new,
    .tp_vectorcall = wrap_vectorcall,
    .tp_dealloc = (destructor)wrap_dealloc,
    .tp_as_buffer = &wrap_as_buffer,
};
