/* A C99 extension module built with CMake against the installed dlpackarray
 * (find_package(dlpackarray CONFIG)); the C++ module consumer.cpp includes
 * this file.  empty(n) returns a new float64 array of n zeros; nbytes(obj)
 * wraps any array-like object and returns its byte count. */
#include "dlpackarray/dlpackarray.h"

#ifndef CONSUMER_NAME
#define CONSUMER_NAME consumer_c
#endif
#define CONSUMER_CAT2(a, b) a##b
#define CONSUMER_CAT(a, b) CONSUMER_CAT2(a, b)
#define CONSUMER_STR2(a) #a
#define CONSUMER_STR(a) CONSUMER_STR2(a)

static PyObject* empty_zeros(PyObject* self, PyObject* arg) {
  int64_t shape[1];
  DLDataType f64 = {kDLFloat, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  PyObject* array;
  DLTensor t;
  int64_t i;
  (void)self;
  shape[0] = PyLong_AsLongLong(arg);
  if (shape[0] == -1 && PyErr_Occurred()) return NULL;
  array = DLPackArray_Empty(1, shape, f64, cpu);
  if (array == NULL) return NULL;
  if (DLPackArray_GetDLTensor(array, &t, NULL) < 0) {
    Py_DECREF(array);
    return NULL;
  }
  for (i = 0; i < shape[0]; ++i) ((double*)t.data)[i] = 0.0;
  return array;
}

static PyObject* nbytes(PyObject* self, PyObject* args) {
  PyObject* array = NULL;
  DLTensor t;
  int64_t n;
  int32_t i;
  (void)self;
  if (!PyArg_ParseTuple(args, "O&", DLPackArray_Converter, &array)) return NULL;
  if (DLPackArray_GetDLTensor(array, &t, NULL) < 0) {
    Py_DECREF(array);
    return NULL;
  }
  n = (t.dtype.bits * t.dtype.lanes + 7) / 8;
  for (i = 0; i < t.ndim; ++i) n *= t.shape[i];
  Py_DECREF(array);
  return PyLong_FromLongLong(n);
}

static PyObject* api_version(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR);
}

static PyMethodDef consumer_methods[] = {
    {"empty_zeros", empty_zeros, METH_O, NULL},
    {"nbytes", nbytes, METH_VARARGS, NULL},
    {"api_version", api_version, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef consumer_module = {
    PyModuleDef_HEAD_INIT, CONSUMER_STR(CONSUMER_NAME), NULL, -1, consumer_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC CONSUMER_CAT(PyInit_, CONSUMER_NAME)(void) {
  if (import_dlpackarray() < 0) return NULL;
  return PyModule_Create(&consumer_module);
}
