/* A PEP 3118 exporter that reports whatever it is told: the adversarial corpus
 * (tests/adversarial/) uses it to describe buffers whose len, itemsize,
 * format, ndim, shape, strides or suboffsets lie about the memory behind
 * them.  Built by tests/adversarial/build_ext.py with the system C compiler.
 *
 * Liar(memory=64, len=None, itemsize=1, format=b"B", ndim=1, shape=None,
 *      strides=None, suboffsets=None, readonly=False, null_buf=False,
 *      fail=False)
 *
 * shape/strides/suboffsets: a tuple of ints (stored as given, ndim is not
 * checked against their length beyond the storage of 64 entries) or None
 * (NULL pointer).  format None gives a NULL format pointer.  fail=True makes
 * getbuffer raise BufferError.  `exports` and `releases` count calls so the
 * tests can check that every successful getbuffer is released once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAXDIM 64

typedef struct {
  PyObject_HEAD char *memory;
  Py_ssize_t memory_len;
  Py_ssize_t len;
  Py_ssize_t itemsize;
  PyObject *format; /* bytes or NULL */
  int ndim;
  int has_shape, has_strides, has_suboffsets;
  Py_ssize_t shape[MAXDIM];
  Py_ssize_t strides[MAXDIM];
  Py_ssize_t suboffsets[MAXDIM];
  int readonly;
  int null_buf;
  int fail;
  long exports;
  long releases;
} Liar;

static int read_tuple(PyObject *obj, Py_ssize_t *out, int *has, const char *what) {
  if (obj == NULL || obj == Py_None) {
    *has = 0;
    return 0;
  }
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) > MAXDIM) {
    PyErr_Format(PyExc_TypeError, "%s must be a tuple of at most %d ints", what, MAXDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); ++i) {
    out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(obj, i));
    if (out[i] == -1 && PyErr_Occurred()) return -1;
  }
  *has = 1;
  return 0;
}

static int Liar_init(Liar *self, PyObject *args, PyObject *kwds) {
  static char *kwlist[] = {"memory", "len",      "itemsize", "format",   "ndim", "shape",
                           "strides", "suboffsets", "readonly", "null_buf", "fail", NULL};
  Py_ssize_t memory = 64, itemsize = 1;
  PyObject *len = Py_None, *format = NULL, *shape = Py_None, *strides = Py_None;
  PyObject *suboffsets = Py_None;
  int ndim = 1, readonly = 0, null_buf = 0, fail = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|nOnOiOOOppp", kwlist, &memory, &len, &itemsize,
                                   &format, &ndim, &shape, &strides, &suboffsets, &readonly,
                                   &null_buf, &fail))
    return -1;
  if (memory < 0 || memory > (1 << 20)) {
    PyErr_SetString(PyExc_ValueError, "memory must be in [0, 1 MiB]");
    return -1;
  }
  PyMem_Free(self->memory);
  self->memory = PyMem_Calloc((size_t)memory + 1, 1);
  if (self->memory == NULL) return -1;
  self->memory_len = memory;
  self->len = len == Py_None ? memory : PyLong_AsSsize_t(len);
  if (self->len == -1 && PyErr_Occurred()) return -1;
  self->itemsize = itemsize;
  Py_CLEAR(self->format);
  if (format == NULL) {
    self->format = PyBytes_FromString("B");
  } else if (format != Py_None) {
    if (!PyBytes_Check(format)) {
      PyErr_SetString(PyExc_TypeError, "format must be bytes or None");
      return -1;
    }
    Py_INCREF(format);
    self->format = format;
  }
  self->ndim = ndim;
  if (read_tuple(shape, self->shape, &self->has_shape, "shape") < 0) return -1;
  if (read_tuple(strides, self->strides, &self->has_strides, "strides") < 0) return -1;
  if (read_tuple(suboffsets, self->suboffsets, &self->has_suboffsets, "suboffsets") < 0)
    return -1;
  self->readonly = readonly;
  self->null_buf = null_buf;
  self->fail = fail;
  return 0;
}

static int Liar_getbuffer(Liar *self, Py_buffer *view, int flags) {
  (void)flags; /* lies do not depend on what was asked */
  if (self->fail) {
    PyErr_SetString(PyExc_BufferError, "Liar refuses to export");
    return -1;
  }
  view->obj = (PyObject *)self;
  Py_INCREF(self);
  view->buf = self->null_buf ? NULL : self->memory;
  view->len = self->len;
  view->readonly = self->readonly;
  view->itemsize = self->itemsize;
  view->format = self->format ? PyBytes_AS_STRING(self->format) : NULL;
  view->ndim = self->ndim;
  view->shape = self->has_shape ? self->shape : NULL;
  view->strides = self->has_strides ? self->strides : NULL;
  view->suboffsets = self->has_suboffsets ? self->suboffsets : NULL;
  view->internal = NULL;
  self->exports++;
  return 0;
}

static void Liar_releasebuffer(Liar *self, Py_buffer *view) {
  (void)view;
  self->releases++;
}

static void Liar_dealloc(Liar *self) {
  Py_CLEAR(self->format);
  PyMem_Free(self->memory);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Liar_get_exports(Liar *self, void *c) {
  (void)c;
  return PyLong_FromLong(self->exports);
}

static PyObject *Liar_get_releases(Liar *self, void *c) {
  (void)c;
  return PyLong_FromLong(self->releases);
}

static PyObject *Liar_get_address(Liar *self, void *c) {
  (void)c;
  return PyLong_FromVoidPtr(self->memory);
}

static PyGetSetDef Liar_getset[] = {
    {"exports", (getter)Liar_get_exports, NULL, "successful getbuffer calls", NULL},
    {"releases", (getter)Liar_get_releases, NULL, "releasebuffer calls", NULL},
    {"address", (getter)Liar_get_address, NULL, "address of the real memory", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyBufferProcs Liar_as_buffer = {(getbufferproc)Liar_getbuffer,
                                       (releasebufferproc)Liar_releasebuffer};

static PyTypeObject LiarType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lying_buffer.Liar",
    .tp_basicsize = sizeof(Liar),
    .tp_dealloc = (destructor)Liar_dealloc,
    .tp_as_buffer = &Liar_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A buffer exporter that reports the fields it is given.",
    .tp_getset = Liar_getset,
    .tp_init = (initproc)Liar_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef lying_buffer_module = {PyModuleDef_HEAD_INIT, "lying_buffer",
                                                 "Buffer exporters that lie.", -1, NULL};

PyMODINIT_FUNC PyInit_lying_buffer(void) {
  if (PyType_Ready(&LiarType) < 0) return NULL;
  PyObject *m = PyModule_Create(&lying_buffer_module);
  if (m == NULL) return NULL;
  Py_INCREF(&LiarType);
  if (PyModule_AddObject(m, "Liar", (PyObject *)&LiarType) < 0) {
    Py_DECREF(&LiarType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
