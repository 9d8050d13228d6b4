/* B9's floors: the least any implementation can do on an Arrow route.
 *
 * - Producer(buffer): wraps a C-contiguous 1-D float32/float64 buffer (one
 *   PyObject_GetBuffer) and exports it through __arrow_c_schema__,
 *   __arrow_c_array__ and __arrow_c_device_array__ with nothing more than the
 *   spec asks: two malloc'ed structs in two capsules, static format strings,
 *   a strong reference to the producer that the array's release drops (under
 *   the GIL, as a release may run on any thread).  No validation beyond the
 *   buffer request, no options: the floor of an export, not a contender.
 *   __arrow_c_stream__ hands out the same array as a one-chunk stream.
 * - TensorProducer(buffer): the same for a C-contiguous 2-D to 8-D float32
 *   buffer, exported as an arrow.fixed_shape_tensor column (format and
 *   extension metadata built once per producer).
 * - consume_arrow(obj): the least an Arrow importer does: calls
 *   obj.__arrow_c_array__(), checks the two capsule names, moves the array
 *   out of its capsule into a new owner object (released when the owner
 *   dies) and reads the data pointer of the leaf's buffer 1 (through a
 *   tensor's fixed-size list levels).
 * - ArrowSpecWrap(obj): the least an Arrow consumer that yields an array can
 *   do: one vectorcall of obj.__arrow_c_array__(), then the checks the C data
 *   interface leaves to a consumer of a primitive column read as a tensor
 *   (capsule names, not yet released, a fixed-width primitive format without
 *   children or dictionary, the array's buffer and child counts, offset and
 *   length in range, no nulls: counted when null_count is -1), the struct
 *   moved into the object itself, and bf_getbuffer answered (1-D, read-only).
 *   The floor of a conforming Arrow import, not a consumer.
 * - consume_arrow_device(obj): the same through obj.__arrow_c_device_array__(),
 *   which a consumer that takes device data calls first (the PyCapsule
 *   interface), refusing anything but CPU memory without a sync event: the
 *   floor of a device-aware import of host data, not a consumer.
 *
 * - DLPackBufferWrap(obj): the least a wrapper that NumPy reads through the
 *   buffer protocol (the first protocol np.asarray tries for an object that
 *   is not an ndarray) can do: calls obj.__dlpack__(max_version=(1, 3)) with
 *   one vectorcall (name, kwnames and version built once), keeps the
 *   versioned capsule (renamed "used_dltensor_versioned", its deleter called
 *   on dealloc) and answers bf_getbuffer from the DLTensor.  Validates
 *   nothing: host data, int/uint/float/bool dtypes of whole bytes, at most
 *   WRAP_MAX_NDIM dimensions; the floor of np.asarray(DLPackArray(x)).
 * - DLPackSpecWrap(obj): the same wrapper doing what the DLPack Python spec
 *   asks of a consumer that is not host-only: obj.__dlpack_device__() first
 *   (the device decides the stream argument; host data takes none), then
 *   __dlpack__, then the capsule checks the spec names (name, major
 *   version, the device the query reported, dtype and lanes).  Refuses
 *   non-CPU data instead of choosing a stream: the floor of a conforming
 *   import of host data, not a consumer.
 *
 * Struct layouts follow the Arrow C data and C device data interfaces and
 * DLPack 1.x.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpackarray/dlpack_abi.h"

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

#define ARROW_DEVICE_CPU 1

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  int32_t device_type;
  void* sync_event;
  int64_t reserved[3];
};

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema*);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray*);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

/* -- producer ------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD Py_buffer view;
  const char* format;
} Producer;

/* The array's private data: its two buffer pointers and the producer it
 * keeps alive. */
typedef struct {
  const void* buffers[2];
  PyObject* owner;
} ArrayPrivate;

static void schema_release(struct ArrowSchema* s) { s->release = NULL; }

static void array_release(struct ArrowArray* a) {
  ArrayPrivate* p = (ArrayPrivate*)a->private_data;
  if (PyGILState_Check() && Py_REFCNT(p->owner) > 1) {
    Py_DECREF(p->owner); /* not the last reference: runs no code */
  } else {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(p->owner);
    PyGILState_Release(g);
  }
  free(p);
  a->release = NULL;
}

static void schema_capsule_free(PyObject* c) {
  struct ArrowSchema* s = PyCapsule_GetPointer(c, "arrow_schema");
  if (s->release != NULL) s->release(s);
  free(s);
}

static void array_capsule_free(PyObject* c) {
  struct ArrowArray* a = PyCapsule_GetPointer(c, "arrow_array");
  if (a->release != NULL) a->release(a);
  free(a);
}

static void device_array_capsule_free(PyObject* c) {
  struct ArrowDeviceArray* a = PyCapsule_GetPointer(c, "arrow_device_array");
  if (a->array.release != NULL) a->array.release(&a->array);
  free(a);
}

static void fill_schema(Producer* self, struct ArrowSchema* s) {
  s->format = self->format;
  s->name = "";
  s->metadata = NULL;
  s->flags = 2; /* ARROW_FLAG_NULLABLE */
  s->n_children = 0;
  s->children = NULL;
  s->dictionary = NULL;
  s->private_data = NULL;
  s->release = schema_release;
}

static PyObject* new_schema(Producer* self) {
  /* malloc and field stores, never calloc: glibc's calloc skips its
   * thread cache, and a floor must not be slower than it need be. */
  struct ArrowSchema* s = malloc(sizeof *s);
  if (s == NULL) return PyErr_NoMemory();
  fill_schema(self, s);
  PyObject* c = PyCapsule_New(s, "arrow_schema", schema_capsule_free);
  if (c == NULL) free(s);
  return c;
}

static int fill_array(Producer* self, struct ArrowArray* a) {
  ArrayPrivate* p = malloc(sizeof *p);
  if (p == NULL) return -1;
  p->buffers[0] = NULL;
  p->buffers[1] = self->view.buf;
  Py_INCREF(self);
  p->owner = (PyObject*)self;
  a->length = self->view.shape[0];
  a->null_count = 0;
  a->offset = 0;
  a->n_children = 0;
  a->children = NULL;
  a->dictionary = NULL;
  a->n_buffers = 2;
  a->buffers = p->buffers;
  a->release = array_release;
  a->private_data = p;
  return 0;
}

static PyObject* pair(PyObject* schema, PyObject* array) {
  if (schema == NULL || array == NULL) {
    Py_XDECREF(schema);
    Py_XDECREF(array);
    return NULL;
  }
  PyObject* t = PyTuple_Pack(2, schema, array);
  Py_DECREF(schema);
  Py_DECREF(array);
  return t;
}

/* The capsule owning a malloc'd array its producer has just filled
 * (fill_status 0), or NULL with an exception set and nothing left allocated. */
static PyObject* array_capsule(struct ArrowArray* a, int fill_status) {
  if (fill_status != 0) {
    free(a);
    return PyErr_NoMemory();
  }
  PyObject* c = PyCapsule_New(a, "arrow_array", array_capsule_free);
  if (c == NULL) {
    a->release(a);
    free(a);
  }
  return c;
}

/* The same for a CPU device array around the filled array. */
static PyObject* device_array_capsule(struct ArrowDeviceArray* a, int fill_status) {
  if (fill_status != 0) {
    free(a);
    return PyErr_NoMemory();
  }
  a->device_id = -1;
  a->device_type = ARROW_DEVICE_CPU;
  a->sync_event = NULL;
  a->reserved[0] = a->reserved[1] = a->reserved[2] = 0;
  PyObject* c = PyCapsule_New(a, "arrow_device_array", device_array_capsule_free);
  if (c == NULL) {
    a->array.release(&a->array);
    free(a);
  }
  return c;
}

static PyObject* producer_schema(Producer* self, PyObject* unused) { return new_schema(self); }

static PyObject* producer_array(Producer* self, PyObject* const* args, Py_ssize_t n, PyObject* kw) {
  struct ArrowArray* a = malloc(sizeof *a);
  if (a == NULL) return PyErr_NoMemory();
  return pair(new_schema(self), array_capsule(a, fill_array(self, a)));
}

static PyObject* producer_device_array(Producer* self, PyObject* const* args, Py_ssize_t n,
                                       PyObject* kw) {
  struct ArrowDeviceArray* a = malloc(sizeof *a);
  if (a == NULL) return PyErr_NoMemory();
  return pair(new_schema(self), device_array_capsule(a, fill_array(self, &a->array)));
}

/* A one-chunk stream; private_data is the producer (a strong reference)
 * until the chunk is handed out, then NULL.  The producer stays alive through
 * the chunk's own reference. */
typedef struct {
  Producer* producer;
  int done;
} StreamPrivate;

static int stream_get_schema(struct ArrowArrayStream* st, struct ArrowSchema* out) {
  fill_schema(((StreamPrivate*)st->private_data)->producer, out);
  return 0;
}

static int stream_get_next(struct ArrowArrayStream* st, struct ArrowArray* out) {
  StreamPrivate* p = st->private_data;
  if (p->done) {
    out->release = NULL;
    return 0;
  }
  PyGILState_STATE g = PyGILState_Ensure(); /* fill_array takes a reference */
  int rc = fill_array(p->producer, out);
  PyGILState_Release(g);
  if (rc != 0) return 12; /* ENOMEM */
  p->done = 1;
  return 0;
}

static const char* stream_last_error(struct ArrowArrayStream* st) { return NULL; }

static void stream_release(struct ArrowArrayStream* st) {
  StreamPrivate* p = st->private_data;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(p->producer);
  PyGILState_Release(g);
  free(p);
  st->release = NULL;
}

static void stream_capsule_free(PyObject* c) {
  struct ArrowArrayStream* st = PyCapsule_GetPointer(c, "arrow_array_stream");
  if (st->release != NULL) st->release(st);
  free(st);
}

static PyObject* producer_stream(Producer* self, PyObject* const* args, Py_ssize_t n,
                                 PyObject* kw) {
  struct ArrowArrayStream* st = malloc(sizeof *st);
  StreamPrivate* p = malloc(sizeof *p);
  if (st == NULL || p == NULL) {
    free(st);
    free(p);
    return PyErr_NoMemory();
  }
  Py_INCREF(self);
  p->producer = self;
  p->done = 0;
  st->get_schema = stream_get_schema;
  st->get_next = stream_get_next;
  st->get_last_error = stream_last_error;
  st->release = stream_release;
  st->private_data = p;
  PyObject* c = PyCapsule_New(st, "arrow_array_stream", stream_capsule_free);
  if (c == NULL) {
    st->release(st);
    free(st);
  }
  return c;
}

static PyObject* producer_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  PyObject* obj;
  if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
  Producer* self = (Producer*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  if (PyObject_GetBuffer(obj, &self->view, PyBUF_ND | PyBUF_FORMAT) != 0) {
    self->view.obj = NULL;
    Py_DECREF(self);
    return NULL;
  }
  const char* f = self->view.format;
  if (self->view.ndim == 1 && f[0] == 'd' && f[1] == 0) {
    self->format = "g";
  } else if (self->view.ndim == 1 && f[0] == 'f' && f[1] == 0) {
    self->format = "f";
  } else {
    PyErr_SetString(PyExc_TypeError, "the B9 floor producer takes 1-D float32/float64 only");
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject*)self;
}

static void producer_dealloc(Producer* self) {
  if (self->view.obj != NULL) PyBuffer_Release(&self->view);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyMethodDef producer_methods[] = {
    {"__arrow_c_schema__", (PyCFunction)producer_schema, METH_NOARGS, NULL},
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))producer_array,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"__arrow_c_device_array__", (PyCFunction)(void (*)(void))producer_device_array,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {"__arrow_c_stream__", (PyCFunction)(void (*)(void))producer_stream,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.Producer",
    .tp_basicsize = sizeof(Producer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = producer_new,
    .tp_dealloc = (destructor)producer_dealloc,
    .tp_methods = producer_methods,
};

/* A variant with only the host array methods: pyarrow reads it through its
 * (non-device) __arrow_c_array__ import. */
static PyMethodDef host_methods[] = {
    {"__arrow_c_schema__", (PyCFunction)producer_schema, METH_NOARGS, NULL},
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))producer_array,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HostProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.HostProducer",
    .tp_basicsize = sizeof(Producer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = producer_new,
    .tp_dealloc = (destructor)producer_dealloc,
    .tp_methods = host_methods,
};

/* -- fixed-shape tensor producer ------------------------------------------
 * The same floor for N-D data: an arrow.fixed_shape_tensor column (a
 * fixed-size list of prod(shape[1:]) values, one row per leading index).
 * Format and extension metadata are built once per producer; each export
 * mallocs one block per struct, parent and child together. */

#define TENSOR_META_MAX 512

typedef struct {
  PyObject_HEAD Py_buffer view;
  int64_t cell; /* values per row */
  char format[32];
  char metadata[TENSOR_META_MAX];
} TensorProducer;

typedef struct {
  struct ArrowSchema top;
  struct ArrowSchema child;
  struct ArrowSchema* children[1];
} TensorSchema;

typedef struct {
  const void* top_buffers[1];
  const void* child_buffers[2];
  struct ArrowArray child;
  struct ArrowArray* children[1];
  PyObject* owner;
} TensorArrayPrivate;

static void tensor_array_release(struct ArrowArray* a) {
  TensorArrayPrivate* p = (TensorArrayPrivate*)a->private_data;
  if (PyGILState_Check() && Py_REFCNT(p->owner) > 1) {
    Py_DECREF(p->owner);
  } else {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(p->owner);
    PyGILState_Release(g);
  }
  free(p);
  a->release = NULL;
}

static void child_array_release(struct ArrowArray* a) { a->release = NULL; }

static void tensor_schema_release(struct ArrowSchema* s) {
  TensorSchema* t = (TensorSchema*)s;
  if (t->child.release != NULL) t->child.release(&t->child);
  s->release = NULL;
}

static void tensor_schema_capsule_free(PyObject* c) {
  struct ArrowSchema* s = PyCapsule_GetPointer(c, "arrow_schema");
  if (s->release != NULL) s->release(s);
  free(s); /* the TensorSchema block */
}

static PyObject* tensor_schema(TensorProducer* self, PyObject* unused) {
  TensorSchema* t = malloc(sizeof *t);
  if (t == NULL) return PyErr_NoMemory();
  t->child.format = "f";
  t->child.name = "";
  t->child.metadata = NULL;
  t->child.flags = 2;
  t->child.n_children = 0;
  t->child.children = NULL;
  t->child.dictionary = NULL;
  t->child.private_data = NULL;
  t->child.release = schema_release;
  t->children[0] = &t->child;
  t->top.format = self->format;
  t->top.name = "";
  t->top.metadata = self->metadata;
  t->top.flags = 2;
  t->top.n_children = 1;
  t->top.children = t->children;
  t->top.dictionary = NULL;
  t->top.private_data = NULL;
  t->top.release = tensor_schema_release;
  PyObject* c = PyCapsule_New(&t->top, "arrow_schema", tensor_schema_capsule_free);
  if (c == NULL) free(t);
  return c;
}

static int tensor_fill_array(TensorProducer* self, struct ArrowArray* a) {
  TensorArrayPrivate* p = malloc(sizeof *p);
  if (p == NULL) return -1;
  p->top_buffers[0] = NULL;
  p->child_buffers[0] = NULL;
  p->child_buffers[1] = self->view.buf;
  struct ArrowArray* c = &p->child;
  c->length = self->view.shape[0] * self->cell;
  c->null_count = 0;
  c->offset = 0;
  c->n_buffers = 2;
  c->n_children = 0;
  c->buffers = p->child_buffers;
  c->children = NULL;
  c->dictionary = NULL;
  c->release = child_array_release;
  c->private_data = NULL;
  p->children[0] = c;
  Py_INCREF(self);
  p->owner = (PyObject*)self;
  a->length = self->view.shape[0];
  a->null_count = 0;
  a->offset = 0;
  a->n_buffers = 1;
  a->n_children = 1;
  a->buffers = p->top_buffers;
  a->children = p->children;
  a->dictionary = NULL;
  a->release = tensor_array_release;
  a->private_data = p;
  return 0;
}

static PyObject* tensor_array(TensorProducer* self, PyObject* const* args, Py_ssize_t n,
                              PyObject* kw) {
  struct ArrowArray* a = malloc(sizeof *a);
  if (a == NULL) return PyErr_NoMemory();
  return pair(tensor_schema(self, NULL), array_capsule(a, tensor_fill_array(self, a)));
}

static PyObject* tensor_device_array(TensorProducer* self, PyObject* const* args, Py_ssize_t n,
                                     PyObject* kw) {
  struct ArrowDeviceArray* a = malloc(sizeof *a);
  if (a == NULL) return PyErr_NoMemory();
  return pair(tensor_schema(self, NULL),
              device_array_capsule(a, tensor_fill_array(self, &a->array)));
}

/* Appends one int32-length-prefixed string (Arrow's metadata encoding). */
static char* put_string(char* p, const char* s, int32_t n) {
  memcpy(p, &n, sizeof n);
  memcpy(p + sizeof n, s, (size_t)n);
  return p + sizeof n + n;
}

static PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  PyObject* obj;
  if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
  TensorProducer* self = (TensorProducer*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  if (PyObject_GetBuffer(obj, &self->view, PyBUF_ND | PyBUF_FORMAT) != 0) {
    self->view.obj = NULL;
    Py_DECREF(self);
    return NULL;
  }
  const char* f = self->view.format;
  if (self->view.ndim < 2 || self->view.ndim > 8 || f[0] != 'f' || f[1] != 0) {
    PyErr_SetString(PyExc_TypeError, "the B9 tensor floor producer takes 2-D to 8-D float32");
    Py_DECREF(self);
    return NULL;
  }
  char json[256];
  int len = snprintf(json, sizeof json, "{\"shape\":[");
  self->cell = 1;
  for (int i = 1; i < self->view.ndim; ++i) {
    self->cell *= self->view.shape[i];
    len += snprintf(json + len, sizeof json - (size_t)len, "%s%zd", i > 1 ? "," : "",
                    self->view.shape[i]);
  }
  len += snprintf(json + len, sizeof json - (size_t)len, "]}");
  snprintf(self->format, sizeof self->format, "+w:%lld", (long long)self->cell);
  static const char kName[] = "ARROW:extension:name";
  static const char kExt[] = "arrow.fixed_shape_tensor";
  static const char kMeta[] = "ARROW:extension:metadata";
  int32_t pairs = 2;
  char* p = self->metadata;
  memcpy(p, &pairs, sizeof pairs);
  p += sizeof pairs;
  p = put_string(p, kName, (int32_t)(sizeof kName - 1));
  p = put_string(p, kExt, (int32_t)(sizeof kExt - 1));
  p = put_string(p, kMeta, (int32_t)(sizeof kMeta - 1));
  put_string(p, json, len);
  return (PyObject*)self;
}

static void tensor_dealloc(TensorProducer* self) {
  if (self->view.obj != NULL) PyBuffer_Release(&self->view);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyMethodDef tensor_methods[] = {
    {"__arrow_c_schema__", (PyCFunction)tensor_schema, METH_NOARGS, NULL},
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))tensor_array, METH_FASTCALL | METH_KEYWORDS,
     NULL},
    {"__arrow_c_device_array__", (PyCFunction)(void (*)(void))tensor_device_array,
     METH_FASTCALL | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TensorProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.TensorProducer",
    .tp_basicsize = sizeof(TensorProducer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = tensor_new,
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_methods = tensor_methods,
};

/* -- DLPack buffer wrapper ------------------------------------------------ */

#define WRAP_MAX_NDIM 8

/* Built once in the module's init: the call costs no allocation. */
static PyObject* dlpack_name;        /* "__dlpack__" */
static PyObject* dlpack_kwnames;     /* ("max_version",) */
static PyObject* dlpack_max_version; /* (1, 3) */
static PyObject* dlpack_device_name; /* "__dlpack_device__" */

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
  PyObject* dev = PyObject_VectorcallMethod(dlpack_device_name, call + 1,
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

static PyTypeObject DLPackSpecWrapType;

/* Both wrappers: one vectorcall of obj.__dlpack__ (the spec consumer asks
 * obj.__dlpack_device__ first and checks the tensor it gets). */
static PyObject* make_wrap(PyTypeObject* type, PyObject* obj) {
  const int spec = type == &DLPackSpecWrapType;
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
  PyObject* call[3] = {NULL, obj, dlpack_max_version};
  PyObject* capsule = PyObject_VectorcallMethod(dlpack_name, call + 1,
                                                1 | PY_VECTORCALL_ARGUMENTS_OFFSET, dlpack_kwnames);
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

static PyTypeObject ArrowSpecWrapType;
static PyObject* make_arrow_wrap(PyTypeObject* type, PyObject* obj);

/* The wrapper types called with one object: the Arrow one or a DLPack one. */
static PyObject* make_any(PyTypeObject* type, PyObject* obj) {
  return type == &ArrowSpecWrapType ? make_arrow_wrap(type, obj) : make_wrap(type, obj);
}

/* Every wrapper type called through its vectorcall: no argument tuple. */
static PyObject* wrap_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf,
                                 PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
    PyErr_Format(PyExc_TypeError, "%s takes one positional argument",
                 ((PyTypeObject*)type)->tp_name);
    return NULL;
  }
  return make_any((PyTypeObject*)type, args[0]);
}

/* The same for calls that bring an argument tuple (PyObject_Call). */
static PyObject* wrap_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  if ((kw != NULL && PyDict_GET_SIZE(kw) != 0) || PyTuple_GET_SIZE(args) != 1) {
    PyErr_Format(PyExc_TypeError, "%s takes one positional argument", type->tp_name);
    return NULL;
  }
  return make_any(type, PyTuple_GET_ITEM(args, 0));
}

static void wrap_dealloc(DLPackBufferWrap* self) {
  if (self->tensor->deleter != NULL) self->tensor->deleter(self->tensor);
  Py_DECREF(self->capsule);
  PyObject_Free(self);
}

static PyBufferProcs wrap_as_buffer = {
    .bf_getbuffer = (getbufferproc)wrap_getbuffer,
};

static PyTypeObject DLPackBufferWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.DLPackBufferWrap",
    .tp_basicsize = sizeof(DLPackBufferWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = wrap_new,
    .tp_vectorcall = wrap_vectorcall,
    .tp_dealloc = (destructor)wrap_dealloc,
    .tp_as_buffer = &wrap_as_buffer,
};

static PyTypeObject DLPackSpecWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.DLPackSpecWrap",
    .tp_basicsize = sizeof(DLPackBufferWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = wrap_new,
    .tp_vectorcall = wrap_vectorcall,
    .tp_dealloc = (destructor)wrap_dealloc,
    .tp_as_buffer = &wrap_as_buffer,
};

/* -- consumer ------------------------------------------------------------ */

static void owner_free(PyObject* c) {
  struct ArrowArray* a = PyCapsule_GetPointer(c, "b9_floor.owner");
  if (a->release != NULL) a->release(a);
  free(a);
}

/* Takes the array out of `res`, the (schema, array) pair a producer returned,
 * into a new owner (steals `res`).  With `device`, the second capsule is an
 * "arrow_device_array" that must describe CPU memory with no event to wait on
 * (a floor of host imports refuses the rest). */
static PyObject* adopt_array(PyObject* res, int device) {
  if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
    Py_DECREF(res);
    PyErr_SetString(PyExc_TypeError, "expected a capsule pair");
    return NULL;
  }
  struct ArrowSchema* s = PyCapsule_GetPointer(PyTuple_GET_ITEM(res, 0), "arrow_schema");
  void* p =
      PyCapsule_GetPointer(PyTuple_GET_ITEM(res, 1), device ? "arrow_device_array" : "arrow_array");
  if (s == NULL || p == NULL) {
    Py_DECREF(res);
    return NULL;
  }
  /* The device struct starts with its ArrowArray. */
  struct ArrowArray* src = p;
  if (device) {
    struct ArrowDeviceArray* d = p;
    if (d->device_type != ARROW_DEVICE_CPU || d->sync_event != NULL) {
      Py_DECREF(res);
      PyErr_SetString(PyExc_ValueError, "not host memory ready to read");
      return NULL;
    }
  }
  struct ArrowArray* a = malloc(sizeof *a);
  if (a == NULL) {
    Py_DECREF(res);
    return PyErr_NoMemory();
  }
  *a = *src;
  src->release = NULL; /* moved */
  Py_DECREF(res);      /* frees the schema */
  PyObject* owner = PyCapsule_New(a, "b9_floor.owner", owner_free);
  if (owner == NULL) {
    if (a->release != NULL) a->release(a);
    free(a);
    return NULL;
  }
  /* Down the fixed-size list chain (a tensor's cells) to the values. */
  const struct ArrowArray* leaf = a;
  while (leaf->n_children == 1 && leaf->children != NULL) leaf = leaf->children[0];
  if (leaf->n_buffers < 2 || leaf->buffers[1] == NULL) {
    Py_DECREF(owner);
    PyErr_SetString(PyExc_ValueError, "no data buffer");
    return NULL;
  }
  return owner;
}

/* Interned in the module's init, as a compiled consumer's names are: a name
 * made per call (PyObject_CallMethod's C string) is a new string object that
 * CPython's type attribute cache never holds, so every call would walk the
 * type's MRO (a cost no consumer needs to pay). */
static PyObject* arrow_array_name;        /* "__arrow_c_array__" */
static PyObject* arrow_device_array_name; /* "__arrow_c_device_array__" */

static PyObject* call_method_noargs(PyObject* name, PyObject* obj) {
  PyObject* call[2] = {NULL, obj};
  return PyObject_VectorcallMethod(name, call + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* -- Arrow spec consumer -------------------------------------------------- */

/* The struct-module format and item size of an Arrow format string that
 * names a fixed-width primitive of whole bytes, or NULL ("b", booleans, is
 * bit-packed: no tensor without a copy). */
static const char* arrow_primitive_format(const char* f, Py_ssize_t* itemsize) {
  if (f == NULL || f[0] == '\0' || f[1] != '\0') return NULL;
  switch (f[0]) {
    case 'c': *itemsize = 1; return "b";
    case 'C': *itemsize = 1; return "B";
    case 's': *itemsize = 2; return "h";
    case 'S': *itemsize = 2; return "H";
    case 'i': *itemsize = 4; return "i";
    case 'I': *itemsize = 4; return "I";
    case 'l': *itemsize = 8; return "q";
    case 'L': *itemsize = 8; return "Q";
    case 'e': *itemsize = 2; return "e";
    case 'f': *itemsize = 4; return "f";
    case 'g': *itemsize = 8; return "d";
    default: return NULL;
  }
}

/* Unset validity bits of rows [offset, offset + length): the null count a
 * producer left uncomputed (-1). */
static int64_t count_unset_bits(const uint8_t* bits, int64_t offset, int64_t length) {
  int64_t unset = 0;
  for (int64_t i = offset; i < offset + length; ++i) unset += ((bits[i >> 3] >> (i & 7)) & 1) == 0;
  return unset;
}

/* What a consumer reading the column as a tensor must check (the capsule
 * names already checked by PyCapsule_GetPointer): NULL when accepted. */
static const char* arrow_spec_refusal(const struct ArrowSchema* s, const struct ArrowArray* a,
                                      const char** format, Py_ssize_t* itemsize) {
  if (s->release == NULL || a->release == NULL)
    return "ArrowSpecWrap: the capsule's struct has already been released";
  *format = arrow_primitive_format(s->format, itemsize);
  if (*format == NULL || s->n_children != 0 || s->dictionary != NULL)
    return "ArrowSpecWrap: not a fixed-width primitive column";
  if (a->n_buffers != 2 || a->buffers == NULL || a->n_children != 0 || a->dictionary != NULL)
    return "ArrowSpecWrap: the array's buffers or children do not match its format";
  /* (offset + length) * itemsize must be an int64 byte count. */
  if (a->length < 0 || a->offset < 0 || a->length > INT64_MAX / *itemsize - a->offset)
    return "ArrowSpecWrap: offset or length out of range";
  if (a->length > 0 && a->buffers[1] == NULL) return "ArrowSpecWrap: no data buffer";
  if (a->null_count != 0) {
    const uint8_t* validity = a->buffers[0];
    if (validity == NULL ? a->null_count > 0
                         : a->null_count > 0 || count_unset_bits(validity, a->offset, a->length))
      return "ArrowSpecWrap: the column holds nulls";
  }
  return NULL;
}

/* The array lives in the object: moved in, released on dealloc. */
typedef struct {
  PyObject_HEAD struct ArrowArray array;
  const char* format;
  Py_ssize_t itemsize;
  Py_ssize_t shape[1];
  Py_ssize_t strides[1];
} ArrowSpecWrap;

static PyObject* make_arrow_wrap(PyTypeObject* type, PyObject* obj) {
  PyObject* res = call_method_noargs(arrow_array_name, obj);
  if (res == NULL) return NULL;
  if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
    Py_DECREF(res);
    PyErr_SetString(PyExc_TypeError, "ArrowSpecWrap: expected a capsule pair");
    return NULL;
  }
  struct ArrowSchema* s = PyCapsule_GetPointer(PyTuple_GET_ITEM(res, 0), "arrow_schema");
  struct ArrowArray* a =
      s == NULL ? NULL : PyCapsule_GetPointer(PyTuple_GET_ITEM(res, 1), "arrow_array");
  const char* format = NULL;
  Py_ssize_t itemsize = 1;
  const char* refusal = a == NULL ? NULL : arrow_spec_refusal(s, a, &format, &itemsize);
  /* Until the move, the capsules' destructors release a refused struct. */
  ArrowSpecWrap* self = a == NULL || refusal != NULL ? NULL : PyObject_New(ArrowSpecWrap, type);
  if (self == NULL) {
    if (refusal != NULL) PyErr_SetString(PyExc_BufferError, refusal);
    Py_DECREF(res);
    return NULL;
  }
  self->array = *a;
  a->release = NULL; /* moved */
  Py_DECREF(res);    /* releases the schema: the format kept is ours, static */
  self->format = format;
  self->itemsize = itemsize;
  return (PyObject*)self;
}

static int arrow_wrap_getbuffer(ArrowSpecWrap* self, Py_buffer* view, int flags) {
  if (flags & PyBUF_WRITABLE) {
    PyErr_SetString(PyExc_BufferError, "ArrowSpecWrap: Arrow data is read-only");
    view->obj = NULL;
    return -1;
  }
  const struct ArrowArray* a = &self->array;
  char* data = (char*)a->buffers[1];
  self->shape[0] = (Py_ssize_t)a->length;
  self->strides[0] = self->itemsize;
  view->buf = data == NULL ? NULL : data + a->offset * self->itemsize;
  view->obj = Py_NewRef(self);
  view->len = self->shape[0] * self->itemsize;
  view->readonly = 1;
  view->itemsize = self->itemsize;
  view->format = (flags & PyBUF_FORMAT) ? (char*)self->format : NULL;
  view->ndim = 1;
  view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static void arrow_wrap_dealloc(ArrowSpecWrap* self) {
  if (self->array.release != NULL) self->array.release(&self->array);
  PyObject_Free(self);
}

static PyBufferProcs arrow_wrap_as_buffer = {
    .bf_getbuffer = (getbufferproc)arrow_wrap_getbuffer,
};

static PyTypeObject ArrowSpecWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.ArrowSpecWrap",
    .tp_basicsize = sizeof(ArrowSpecWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = wrap_new,
    .tp_vectorcall = wrap_vectorcall,
    .tp_dealloc = (destructor)arrow_wrap_dealloc,
    .tp_as_buffer = &arrow_wrap_as_buffer,
};

static PyObject* consume_arrow(PyObject* mod, PyObject* obj) {
  PyObject* res = call_method_noargs(arrow_array_name, obj);
  return res == NULL ? NULL : adopt_array(res, 0);
}

static PyObject* consume_arrow_device(PyObject* mod, PyObject* obj) {
  PyObject* res = call_method_noargs(arrow_device_array_name, obj);
  return res == NULL ? NULL : adopt_array(res, 1);
}

static PyMethodDef module_methods[] = {
    {"consume_arrow", consume_arrow, METH_O, NULL},
    {"consume_arrow_device", consume_arrow_device, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "b9_floor", NULL, -1, module_methods,
};

PyMODINIT_FUNC PyInit_b9_floor(void) {
  if (PyType_Ready(&ProducerType) < 0 || PyType_Ready(&HostProducerType) < 0 ||
      PyType_Ready(&TensorProducerType) < 0 || PyType_Ready(&DLPackBufferWrapType) < 0 ||
      PyType_Ready(&DLPackSpecWrapType) < 0 || PyType_Ready(&ArrowSpecWrapType) < 0)
    return NULL;
  dlpack_name = PyUnicode_InternFromString("__dlpack__");
  /* Interned, as a compiled consumer's string constants are (Cython's, ours):
   * a Cython producer's keyword parser then matches the name by pointer; an
   * uninterned one costs it a string comparison (~110 instructions), which
   * no consumer needs to pay. */
  PyObject* max_version_name = PyUnicode_InternFromString("max_version");
  dlpack_kwnames = max_version_name == NULL ? NULL : PyTuple_Pack(1, max_version_name);
  Py_XDECREF(max_version_name);
  dlpack_max_version = Py_BuildValue("(ii)", 1, 3);
  dlpack_device_name = PyUnicode_InternFromString("__dlpack_device__");
  arrow_array_name = PyUnicode_InternFromString("__arrow_c_array__");
  arrow_device_array_name = PyUnicode_InternFromString("__arrow_c_device_array__");
  if (dlpack_name == NULL || dlpack_kwnames == NULL || dlpack_max_version == NULL ||
      dlpack_device_name == NULL || arrow_array_name == NULL || arrow_device_array_name == NULL)
    return NULL;
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  Py_INCREF(&ProducerType);
  Py_INCREF(&HostProducerType);
  Py_INCREF(&TensorProducerType);
  Py_INCREF(&DLPackBufferWrapType);
  Py_INCREF(&DLPackSpecWrapType);
  Py_INCREF(&ArrowSpecWrapType);
  if (PyModule_AddObject(m, "Producer", (PyObject*)&ProducerType) < 0 ||
      PyModule_AddObject(m, "HostProducer", (PyObject*)&HostProducerType) < 0 ||
      PyModule_AddObject(m, "TensorProducer", (PyObject*)&TensorProducerType) < 0 ||
      PyModule_AddObject(m, "DLPackBufferWrap", (PyObject*)&DLPackBufferWrapType) < 0 ||
      PyModule_AddObject(m, "DLPackSpecWrap", (PyObject*)&DLPackSpecWrapType) < 0 ||
      PyModule_AddObject(m, "ArrowSpecWrap", (PyObject*)&ArrowSpecWrapType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
