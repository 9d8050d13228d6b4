/* B9's Arrow producer floors: Producer, HostProducer and TensorProducer
 * (b9_floor_module.c: what each one measures). */
#include "b9_floor.h"

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

PyTypeObject b9_ProducerType = {
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

PyTypeObject b9_HostProducerType = {
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

PyTypeObject b9_TensorProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.TensorProducer",
    .tp_basicsize = sizeof(TensorProducer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = tensor_new,
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_methods = tensor_methods,
};
