/* B9's Arrow import floors: consume_arrow, consume_arrow_device and
 * ArrowSpecWrap (b9_floor_module.c: what each one measures). */
#include "b9_floor.h"

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
PyObject* b9_arrow_array_name;        /* "__arrow_c_array__" */
PyObject* b9_arrow_device_array_name; /* "__arrow_c_device_array__" */

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
  PyObject* res = call_method_noargs(b9_arrow_array_name, obj);
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

/* ArrowSpecWrap's constructors, as the DLPack wrappers' (b9_only_argument). */
static PyObject* arrow_wrap_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf,
                                       PyObject* kwnames) {
  PyObject* obj = b9_only_argument(type, args, nargsf, kwnames);
  return obj == NULL ? NULL : make_arrow_wrap((PyTypeObject*)type, obj);
}

static PyObject* arrow_wrap_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  PyObject* obj = b9_only_item(type, args, kw);
  return obj == NULL ? NULL : make_arrow_wrap(type, obj);
}

static void arrow_wrap_dealloc(ArrowSpecWrap* self) {
  if (self->array.release != NULL) self->array.release(&self->array);
  PyObject_Free(self);
}

static PyBufferProcs arrow_wrap_as_buffer = {
    .bf_getbuffer = (getbufferproc)arrow_wrap_getbuffer,
};

PyTypeObject b9_ArrowSpecWrapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "b9_floor.ArrowSpecWrap",
    .tp_basicsize = sizeof(ArrowSpecWrap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = arrow_wrap_new,
    .tp_vectorcall = arrow_wrap_vectorcall,
    .tp_dealloc = (destructor)arrow_wrap_dealloc,
    .tp_as_buffer = &arrow_wrap_as_buffer,
};

PyObject* b9_consume_arrow(PyObject* mod, PyObject* obj) {
  PyObject* res = call_method_noargs(b9_arrow_array_name, obj);
  return res == NULL ? NULL : adopt_array(res, 0);
}

PyObject* b9_consume_arrow_device(PyObject* mod, PyObject* obj) {
  PyObject* res = call_method_noargs(b9_arrow_device_array_name, obj);
  return res == NULL ? NULL : adopt_array(res, 1);
}
