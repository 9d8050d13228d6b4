/* The floor of a DLPack export from Python: a producer that does the least any
 * producer can.  Its __dlpack__ takes its keywords without reading them, and
 * returns a fresh "dltensor_versioned" capsule over a float64[1024] it holds,
 * in one malloc'd block (struct, shape, strides); the deleter drops the owner
 * and frees the block, assuming the GIL.  No checks, no stream or device
 * handling, no flags: B1 and B2 time it beside the real producers
 * (benchmarks/cases_exchange.py builds this file). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "dlpackarray/dlpackarray.h"

typedef struct {
  PyObject_HEAD PyObject* owner; /* keeps `data` alive */
  void* data;
  int64_t n;
} FloorProducer;

typedef struct {
  DLManagedTensorVersioned m;
  int64_t shape[1];
  int64_t strides[1];
} Block;

static const char kName[] = "dltensor_versioned";

static void deleter(DLManagedTensorVersioned* self) {
  Py_XDECREF((PyObject*)self->manager_ctx);
  free(self);
}

static void capsule_destructor(PyObject* capsule) {
  /* Unconsumed (still our name): the tensor is the capsule's to delete. */
  if (PyCapsule_GetName(capsule) != kName) return;
  DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, kName);
  if (m != NULL) m->deleter(m);
}

static PyObject* dlpack(PyObject* self_obj, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  (void)args;
  (void)nargs;
  (void)kwnames;
  FloorProducer* self = (FloorProducer*)self_obj;
  Block* b = (Block*)malloc(sizeof(Block));
  if (b == NULL) return PyErr_NoMemory();
  b->m.version.major = 1;
  b->m.version.minor = 3;
  Py_INCREF(self->owner);
  b->m.manager_ctx = self->owner;
  b->m.deleter = deleter;
  b->m.flags = 0;
  b->m.dl_tensor.data = self->data;
  b->m.dl_tensor.device.device_type = kDLCPU;
  b->m.dl_tensor.device.device_id = 0;
  b->m.dl_tensor.ndim = 1;
  b->m.dl_tensor.dtype.code = kDLFloat;
  b->m.dl_tensor.dtype.bits = 64;
  b->m.dl_tensor.dtype.lanes = 1;
  b->shape[0] = self->n;
  b->strides[0] = 1;
  b->m.dl_tensor.shape = b->shape;
  b->m.dl_tensor.strides = b->strides;
  b->m.dl_tensor.byte_offset = 0;
  PyObject* capsule = PyCapsule_New(&b->m, kName, capsule_destructor);
  if (capsule == NULL) deleter(&b->m);
  return capsule;
}

static PyObject* dlpack_device(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static int init(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  FloorProducer* self = (FloorProducer*)self_obj;
  PyObject* owner;
  unsigned long long address;
  long long n;
  (void)kwargs;
  if (!PyArg_ParseTuple(args, "OKL", &owner, &address, &n)) return -1;
  Py_INCREF(owner);
  Py_XSETREF(self->owner, owner);
  self->data = (void*)(uintptr_t)address;
  self->n = n;
  return 0;
}

static void dealloc(PyObject* self_obj) {
  FloorProducer* self = (FloorProducer*)self_obj;
  PyTypeObject* tp = Py_TYPE(self_obj);
  Py_XDECREF(self->owner);
  tp->tp_free(self_obj);
  Py_DECREF(tp);
}

static PyMethodDef methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))dlpack, METH_FASTCALL | METH_KEYWORDS, NULL},
    {"__dlpack_device__", dlpack_device, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot slots[] = {
    {Py_tp_init, (void*)init},
    {Py_tp_dealloc, (void*)dealloc},
    {Py_tp_methods, methods},
    {Py_tp_new, (void*)PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec spec = {"floor_producer.FloorProducer", sizeof(FloorProducer), 0,
                           Py_TPFLAGS_DEFAULT, slots};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "floor_producer", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_floor_producer(void) {
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  PyObject* t = PyType_FromSpec(&spec);
  if (t == NULL || PyModule_AddObject(m, "FloorProducer", t) != 0) {
    Py_XDECREF(t);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
