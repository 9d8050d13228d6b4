/* B10/from-object, NumPy's side: n x PyArray_FromAny(obj) + Py_DECREF, the
 * C call a NumPy extension makes to accept "any array" (here an ndarray,
 * returned as is).  Built by benchmarks/cases_capi.py with numpy's headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

static PyObject* loop_from_any(PyObject* self, PyObject* args) {
  PyObject* obj;
  Py_ssize_t n, i;
  (void)self;
  if (!PyArg_ParseTuple(args, "On", &obj, &n)) return NULL;
  for (i = 0; i < n; ++i) {
    PyObject* a = PyArray_FromAny(obj, NULL, 0, 0, 0, NULL);
    if (a == NULL) return NULL;
    Py_DECREF(a);
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"loop_from_any", loop_from_any, METH_VARARGS, "n x (PyArray_FromAny(obj), Py_DECREF)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "b10_numpy", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_b10_numpy(void) {
  import_array();
  return PyModule_Create(&moddef);
}
