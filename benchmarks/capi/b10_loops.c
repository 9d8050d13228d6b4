/* B10 timing loops in C: n times { wrap a static buffer -> export an owning
 * DLManagedTensorVersioned -> consume it (read it, call its deleter) -> drop
 * the wrapper }.  The loop lives in C so the per-op time is the C path's
 * own, not a Python call's; benchmarks/cases_capi.py builds this file. */
#include "dlpackarray/dlpackarray.h"

#define LEN 1024
static double buf[LEN];
static int64_t shape[1] = {LEN};
static int64_t unit_stride[1] = {1};

/* The wrapped tensor handed to a producer's managed_tensor_to_py_object_no_sync:
 * static, with a deleter that only counts, so every op pays the producer's
 * cost alone.  The count proves each wrap was released before the next one
 * reuses the struct (checked by the setup, outside the timed loop). */
static long long released = 0;
static void count_release(DLManagedTensorVersioned* self) {
  (void)self;
  ++released;
}
static DLManagedTensorVersioned source;

static void init_source(void) {
  source.version.major = 1;
  source.version.minor = 3;
  source.manager_ctx = NULL;
  source.deleter = count_release;
  source.flags = 0;
  source.dl_tensor.data = buf;
  source.dl_tensor.device.device_type = kDLCPU;
  source.dl_tensor.device.device_id = 0;
  source.dl_tensor.ndim = 1;
  source.dl_tensor.dtype.code = kDLFloat;
  source.dl_tensor.dtype.bits = 64;
  source.dl_tensor.dtype.lanes = 1;
  source.dl_tensor.shape = shape;
  source.dl_tensor.strides = unit_stride;
  source.dl_tensor.byte_offset = 0;
}
/* The consumer: checks what it got, then releases it. */
static int consume(DLManagedTensorVersioned* m) {
  int ok = m != NULL && m->dl_tensor.data == (void*)buf && m->dl_tensor.shape[0] == LEN;
  if (m != NULL && m->deleter != NULL) m->deleter(m);
  if (!ok) PyErr_SetString(PyExc_AssertionError, "exported tensor does not describe the buffer");
  return ok ? 0 : -1;
}

/* dlpackarray's C API: DLPackArray_FromData + DLPackArray_ToManagedVersioned. */
static PyObject* loop_capi(PyObject* self, PyObject* arg) {
  Py_ssize_t n = PyLong_AsSsize_t(arg), i;
  DLDataType f64 = {kDLFloat, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  (void)self;
  if (n < 0 && PyErr_Occurred()) return NULL;
  for (i = 0; i < n; ++i) {
    PyObject* a = DLPackArray_FromData(buf, 1, shape, NULL, f64, cpu, 0, NULL, NULL, NULL);
    DLManagedTensorVersioned* m;
    if (a == NULL) return NULL;
    m = DLPackArray_ToManagedVersioned(a);
    if (m == NULL || consume(m) < 0) {
      Py_DECREF(a);
      return NULL;
    }
    Py_DECREF(a);
  }
  Py_RETURN_NONE;
}

/* Any producer's DLPack C exchange table (the capsule on its tensor type):
 * managed_tensor_to_py_object_no_sync wraps the static tensor as the
 * producer's Python tensor, managed_tensor_from_py_object_no_sync exports it. */
static PyObject* loop_exchange(PyObject* self, PyObject* args) {
  PyObject* capsule;
  Py_ssize_t n, i;
  const DLPackExchangeAPI* api;
  (void)self;
  if (!PyArg_ParseTuple(args, "On", &capsule, &n)) return NULL;
  api = (const DLPackExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  if (api == NULL) return NULL;
  if (api->managed_tensor_to_py_object_no_sync == NULL ||
      api->managed_tensor_from_py_object_no_sync == NULL) {
    PyErr_SetString(PyExc_NotImplementedError, "the table lacks the to/from py_object functions");
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    void* obj = NULL;
    DLManagedTensorVersioned* m = NULL;
    if (api->managed_tensor_to_py_object_no_sync(&source, &obj) != 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "to_py_object failed");
      return NULL;
    }
    if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) {
      Py_DECREF((PyObject*)obj);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "from_py_object failed");
      return NULL;
    }
    if (consume(m) < 0) {
      Py_DECREF((PyObject*)obj);
      return NULL;
    }
    Py_DECREF((PyObject*)obj);
  }
  Py_RETURN_NONE;
}

/* B10/from-object: n x DLPackArray_FromObject(obj) + Py_DECREF (obj a NumPy array). */
static PyObject* loop_from_object(PyObject* self, PyObject* args) {
  PyObject* obj;
  Py_ssize_t n, i;
  (void)self;
  if (!PyArg_ParseTuple(args, "On", &obj, &n)) return NULL;
  for (i = 0; i < n; ++i) {
    PyObject* a = DLPackArray_FromObject(obj, DLPACKARRAY_COPY_IF_NEEDED, NULL);
    if (a == NULL) return NULL;
    Py_DECREF(a);
  }
  Py_RETURN_NONE;
}

static PyObject* released_count(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLongLong(released);
}

static PyMethodDef methods[] = {
    {"loop_capi", loop_capi, METH_O, "n x (from_data, to_managed_versioned, deleter, decref)"},
    {"loop_exchange", loop_exchange, METH_VARARGS,
     "n x (to_py_object, from_py_object, deleter, decref) through an exchange table"},
    {"loop_from_object", loop_from_object, METH_VARARGS,
     "n x (DLPackArray_FromObject(obj), Py_DECREF)"},
    {"released_count", released_count, METH_NOARGS, "deleter calls of the wrapped tensor"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "b10_c", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_b10_c(void) {
  if (import_dlpackarray() < 0) return NULL;
  init_source();
  return PyModule_Create(&moddef);
}
