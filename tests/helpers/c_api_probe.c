/* A downstream C extension that calls the dlpackarray C API and the DLPack
 * exchange table the way careless or unlucky C code does: with NULL
 * arguments, and before (or without) a successful import_dlpackarray().
 *
 * Built by tests/capi/test_c_api_null_and_versions.py against dlpackarray.h alone
 * (C99, -Wall -Werror).  It deliberately never calls import_dlpackarray() at
 * initialisation, so the first call of any wrapper takes the lazy load.
 * PROBE_MODULE names the module (the tests build it three times: against the
 * header as shipped, against a copy announcing a newer minor version, and
 * against the 1.0 header of tests/helpers/c_api_1_0/, which lacks the 1.1 calls).
 */
#include <stdio.h>
#include <string.h>

#include "dlpackarray/dlpackarray.h"

#ifndef PROBE_MODULE
#define PROBE_MODULE c_api_probe
#endif
#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)
#define PROBE_STR2(a) #a
#define PROBE_STR(a) PROBE_STR2(a)

static long freed = 0; /* deleter calls, of every kind */
static char error_kind[64];
static char error_message[256];

static void count_data(void* ctx) {
  (void)ctx;
  ++freed;
}
static void count_versioned(DLManagedTensorVersioned* m) {
  (void)m;
  ++freed;
}
static void count_legacy(DLManagedTensor* m) {
  (void)m;
  ++freed;
}
static void record_error(void* ctx, const char* kind, const char* message) {
  (void)ctx;
  snprintf(error_kind, sizeof error_kind, "%s", kind);
  snprintf(error_message, sizeof error_message, "%s", message);
}

/* The exception set (or None), taken out of the error indicator. */
static PyObject* take_exception(void) {
  PyObject* exc;
#if PY_VERSION_HEX >= 0x030C0000
  exc = PyErr_GetRaisedException();
#else
  PyObject *type, *tb;
  PyErr_Fetch(&type, &exc, &tb);
  PyErr_NormalizeException(&type, &exc, &tb);
  Py_XDECREF(type);
  Py_XDECREF(tb);
#endif
  if (exc == NULL) Py_RETURN_NONE;
  return exc;
}

/* (code, exception): what a call returned (an int, or 1/0 for a pointer
 * that is / is not NULL) and what it left in the error indicator. */
static PyObject* outcome(long code) {
  PyObject* exc = take_exception();
  PyObject* result = Py_BuildValue("(lO)", code, exc);
  Py_DECREF(exc);
  return result;
}

static long pointer_code(PyObject* result) {
  Py_XDECREF(result);
  return result != NULL;
}

static long managed_code(DLManagedTensorVersioned* m) {
  if (m != NULL && m->deleter != NULL) m->deleter(m);
  return m != NULL;
}

static const DLPackExchangeAPI* exchange_table(PyObject* obj) {
  PyObject* capsule = PyObject_GetAttrString((PyObject*)Py_TYPE(obj), "__dlpack_c_exchange_api__");
  const DLPackExchangeAPI* api;
  if (capsule == NULL) return NULL;
  api = (const DLPackExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  return api;
}

/* call(scenario, arg, pending): runs one call; `arg` is the object used where
 * a valid one is needed; with `pending` true a KeyError is set beforehand, as
 * after the failed call that produced a NULL. */
static PyObject* call(PyObject* self, PyObject* args) {
  const char* s;
  PyObject* arg;
  int pending;
  long code = -99;
  DLTensor t;
  int readonly = 0;
  static int64_t shape[1] = {1};
  static double one = 1.0;
  static DLManagedTensorVersioned versioned;
  static DLManagedTensor legacy;
  DLDataType f64 = {kDLFloat, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  (void)self;
  if (!PyArg_ParseTuple(args, "sOp", &s, &arg, &pending)) return NULL;
  memset(&t, 0, sizeof t);
  memset(&versioned, 0, sizeof versioned);
  versioned.version.major = 1;
  versioned.version.minor = 3;
  versioned.deleter = count_versioned;
  versioned.dl_tensor.data = &one;
  versioned.dl_tensor.device = cpu;
  versioned.dl_tensor.ndim = 1;
  versioned.dl_tensor.dtype = f64;
  versioned.dl_tensor.shape = shape;
  versioned.dl_tensor.strides = shape; /* {1} */
  legacy.dl_tensor = versioned.dl_tensor;
  legacy.manager_ctx = NULL;
  legacy.deleter = count_legacy;
  error_kind[0] = error_message[0] = '\0';
  if (pending) PyErr_SetString(PyExc_KeyError, "pending");

  /* -- the C API -- */
  if (!strcmp(s, "type")) {
    code = DLPackArray_Type() != NULL;
  } else if (!strcmp(s, "check(NULL)")) {
    code = DLPackArray_Check(NULL);
  } else if (!strcmp(s, "check(arg)")) {
    code = DLPackArray_Check(arg);
  } else if (!strcmp(s, "from_object(NULL)")) {
    code = pointer_code(DLPackArray_FromObject(NULL, DLPACKARRAY_COPY_IF_NEEDED, NULL));
  } else if (!strcmp(s, "from_object(arg)")) {
    code = pointer_code(DLPackArray_FromObject(arg, DLPACKARRAY_COPY_IF_NEEDED, NULL));
  } else if (!strcmp(s, "from_data(deleter)")) {
    code = pointer_code(
        DLPackArray_FromData(&one, 1, shape, NULL, f64, cpu, 1, NULL, count_data, NULL));
  } else if (!strcmp(s, "from_data(shape=NULL)")) {
    code = pointer_code(
        DLPackArray_FromData(&one, 1, NULL, NULL, f64, cpu, 1, NULL, count_data, NULL));
  } else if (!strcmp(s, "from_managed_versioned(NULL)")) {
    code = pointer_code(DLPackArray_FromManagedVersioned(NULL));
  } else if (!strcmp(s, "from_managed_versioned(tensor)")) {
    code = pointer_code(DLPackArray_FromManagedVersioned(&versioned));
  } else if (!strcmp(s, "from_managed_legacy(NULL)")) {
    code = pointer_code(DLPackArray_FromManagedLegacy(NULL));
  } else if (!strcmp(s, "from_managed_legacy(tensor)")) {
    code = pointer_code(DLPackArray_FromManagedLegacy(&legacy));
  } else if (!strcmp(s, "get_dltensor(NULL, out)")) {
    code = DLPackArray_GetDLTensor(NULL, &t, &readonly);
  } else if (!strcmp(s, "get_dltensor(arg, NULL)")) {
    code = DLPackArray_GetDLTensor(arg, NULL, &readonly);
  } else if (!strcmp(s, "get_dltensor(arg, out)")) {
    code = DLPackArray_GetDLTensor(arg, &t, NULL);
  } else if (!strcmp(s, "to_managed_versioned(NULL)")) {
    code = managed_code(DLPackArray_ToManagedVersioned(NULL));
  } else if (!strcmp(s, "to_managed_versioned(arg)")) {
    code = managed_code(DLPackArray_ToManagedVersioned(arg));
  } else if (!strcmp(s, "to_capsule(NULL)")) {
    code = pointer_code(DLPackArray_ToCapsule(NULL, 1));
  } else if (!strcmp(s, "to_capsule(arg)")) {
    code = pointer_code(DLPackArray_ToCapsule(arg, 1));
#if DLPACKARRAY_C_API_MINOR >= 1
    /* -- 1.1 (absent when built against the 1.0 header) -- */
  } else if (!strcmp(s, "empty(cpu)")) {
    code = pointer_code(DLPackArray_Empty(1, shape, f64, cpu));
  } else if (!strcmp(s, "empty(shape=NULL)")) {
    code = pointer_code(DLPackArray_Empty(1, NULL, f64, cpu));
  } else if (!strcmp(s, "is_contiguous(NULL)")) {
    code = DLPackArray_IsContiguous(NULL, 'C');
  } else if (!strcmp(s, "is_contiguous(arg)")) {
    code = DLPackArray_IsContiguous(arg, 'C');
  } else if (!strcmp(s, "as_contiguous(NULL)")) {
    code = pointer_code(DLPackArray_AsContiguous(NULL));
  } else if (!strcmp(s, "as_contiguous(arg)")) {
    code = pointer_code(DLPackArray_AsContiguous(arg));
  } else if (!strcmp(s, "converter(arg, NULL)")) {
    code = DLPackArray_Converter(arg, NULL);
  } else if (!strcmp(s, "converter(arg)")) {
    PyObject* out = NULL;
    code = DLPackArray_Converter(arg, &out);
    if (code != 0) code = DLPackArray_Converter(NULL, &out) == 1 && out == NULL ? 2 : -2;
  } else if (!strcmp(s, "converter(NULL, NULL)")) {
    code = DLPackArray_Converter(NULL, NULL); /* a cleanup call with nothing to clean */
  } else if (!strcmp(s, "from_object_on_stream(NULL)")) {
    code = pointer_code(DLPackArray_FromObjectOnStream(NULL, DLPACKARRAY_COPY_IF_NEEDED, NULL, -1));
  } else if (!strcmp(s, "from_object_on_stream(arg)")) {
    code = pointer_code(DLPackArray_FromObjectOnStream(arg, DLPACKARRAY_COPY_IF_NEEDED, NULL, -1));
#endif
  } else if (!strncmp(s, "ex.", 3)) {
    /* -- the exchange table of type(arg) -- */
    const DLPackExchangeAPI* api;
    DLManagedTensorVersioned* m = NULL;
    void* out_obj = NULL;
    DLTensor proto;
    PyObject* exc = NULL;
    if (pending) exc = take_exception(); /* the lookup needs a clean indicator */
    api = exchange_table(arg);
    if (api == NULL) {
      Py_XDECREF(exc);
      return NULL;
    }
    if (pending) {
      PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
      Py_DECREF(exc);
    }
    memset(&proto, 0, sizeof proto);
    proto.device = cpu;
    proto.ndim = 1;
    proto.dtype = f64;
    proto.shape = shape;
    s += 3;
    if (!strcmp(s, "allocator(out=NULL)")) {
      code = api->managed_tensor_allocator(&proto, NULL, NULL, record_error);
    } else if (!strcmp(s, "allocator(SetError=NULL)")) {
      code = api->managed_tensor_allocator(&proto, &m, NULL, NULL);
    } else if (!strcmp(s, "allocator(prototype=NULL)")) {
      code = api->managed_tensor_allocator(NULL, &m, NULL, record_error);
    } else if (!strcmp(s, "from_py(NULL, out)")) {
      code = api->managed_tensor_from_py_object_no_sync(NULL, &m);
    } else if (!strcmp(s, "from_py(arg, NULL)")) {
      code = api->managed_tensor_from_py_object_no_sync(arg, NULL);
    } else if (!strcmp(s, "to_py(NULL, out)")) {
      code = api->managed_tensor_to_py_object_no_sync(NULL, &out_obj);
    } else if (!strcmp(s, "to_py(tensor, NULL)")) {
      code = api->managed_tensor_to_py_object_no_sync(&versioned, NULL);
    } else if (!strcmp(s, "dltensor_from_py(NULL, out)")) {
      code = api->dltensor_from_py_object_no_sync(NULL, &t);
    } else if (!strcmp(s, "dltensor_from_py(arg, NULL)")) {
      code = api->dltensor_from_py_object_no_sync(arg, NULL);
    } else if (!strcmp(s, "current_work_stream(NULL)")) {
      code = api->current_work_stream(kDLCPU, 0, NULL);
    } else {
      PyErr_Format(PyExc_ValueError, "unknown exchange scenario %s", s);
      return NULL;
    }
    if (m != NULL && m->deleter != NULL) m->deleter(m); /* never expected */
    Py_XDECREF((PyObject*)out_obj);
  } else {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "unknown scenario %s", s);
    return NULL;
  }
  return outcome(code);
}

static PyObject* load(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  if (import_dlpackarray() < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* loaded(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(DLPackArray_API != NULL);
}

static PyObject* header_version(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", DLPACKARRAY_C_API_MAJOR, DLPACKARRAY_C_API_MINOR);
}

/* freed(): deleter calls so far; set_error(): the last SetError report. */
static PyObject* freed_count(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(freed);
}

static PyObject* set_error_report(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ss)", error_kind, error_message);
}

static PyMethodDef methods[] = {
    {"call", call, METH_VARARGS, NULL},
    {"load", load, METH_NOARGS, NULL},
    {"loaded", loaded, METH_NOARGS, NULL},
    {"header_version", header_version, METH_NOARGS, NULL},
    {"freed", freed_count, METH_NOARGS, NULL},
    {"set_error", set_error_report, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, PROBE_STR(PROBE_MODULE), NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PROBE_CAT(PyInit_, PROBE_MODULE)(void) { return PyModule_Create(&module); }
