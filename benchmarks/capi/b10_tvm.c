/* B10's tvm-ffi contender: its C API, no Python object involved.
 * TVMFFITensorFromDLPackVersioned wraps a static managed tensor as a tvm-ffi
 * Tensor, TVMFFITensorToDLPackVersioned exports it, the consumer calls the
 * deleter, and TVMFFIObjectDecRef drops the Tensor (which releases the
 * wrapped tensor).  Built by benchmarks/cases_capi.py against the headers and
 * library apache-tvm-ffi ships. */
#include <Python.h>

#include "tvm/ffi/c_api.h"

#define LEN 1024
static double buf[LEN];
static int64_t shape[1] = {LEN};
static int64_t unit_stride[1] = {1};
static long long released = 0;
static void count_release(DLManagedTensorVersioned* self) {
  (void)self;
  ++released;
}
static DLManagedTensorVersioned source;

static PyObject* fail(const char* what) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err != NULL) TVMFFIObjectDecRef(err);
  PyErr_Format(PyExc_RuntimeError, "%s failed", what);
  return NULL;
}

static PyObject* loop_tvm_capi(PyObject* self, PyObject* arg) {
  Py_ssize_t n = PyLong_AsSsize_t(arg), i;
  (void)self;
  if (n < 0 && PyErr_Occurred()) return NULL;
  for (i = 0; i < n; ++i) {
    TVMFFIObjectHandle t = NULL;
    DLManagedTensorVersioned* m = NULL;
    int ok;
    if (TVMFFITensorFromDLPackVersioned(&source, 0, 0, &t) != 0) {
      return fail("TVMFFITensorFromDLPackVersioned");
    }
    if (TVMFFITensorToDLPackVersioned(t, &m) != 0) {
      TVMFFIObjectDecRef(t);
      return fail("TVMFFITensorToDLPackVersioned");
    }
    ok = m->dl_tensor.data == (void*)buf && m->dl_tensor.shape[0] == LEN;
    m->deleter(m);
    TVMFFIObjectDecRef(t);
    if (!ok) {
      PyErr_SetString(PyExc_AssertionError, "exported tensor does not describe the buffer");
      return NULL;
    }
  }
  Py_RETURN_NONE;
}

static PyObject* released_count(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLongLong(released);
}

static PyMethodDef methods[] = {
    {"loop_tvm_capi", loop_tvm_capi, METH_O,
     "n x (TensorFromDLPackVersioned, TensorToDLPackVersioned, deleter, DecRef)"},
    {"released_count", released_count, METH_NOARGS, "deleter calls of the wrapped tensor"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "b10_tvm", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_b10_tvm(void) {
  source.version.major = 1;
  source.version.minor = 3;
  source.deleter = count_release;
  source.dl_tensor.data = buf;
  source.dl_tensor.device.device_type = kDLCPU;
  source.dl_tensor.device.device_id = 0;
  source.dl_tensor.ndim = 1;
  source.dl_tensor.dtype.code = kDLFloat;
  source.dl_tensor.dtype.bits = 64;
  source.dl_tensor.dtype.lanes = 1;
  source.dl_tensor.shape = shape;
  source.dl_tensor.strides = unit_stride;
  return PyModule_Create(&moddef);
}
