// A CPython extension written in C++ against dlpackarray/dlpackarray.h only:
// no Cython, no dlpackarray C++ headers, nothing linked.  It produces tensors
// for dlpackarray (a managed tensor with a counting deleter) and consumes
// DLPackArrays (borrowing their DLTensor).  Built and exercised by
// tests/capi/test_c_api_downstream.py.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "dlpackarray/dlpackarray.h"

namespace {

int g_deleted = 0;  // managed tensors whose deleter has run

// A DLPack 1.3 managed tensor owning a float32 vector; the deleter frees both.
struct Owned {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
  int64_t strides[1];
  float data[1];  // over-allocated
};

void delete_owned(DLManagedTensorVersioned* self) {
  std::free(self->manager_ctx);
  ++g_deleted;
}

DLManagedTensorVersioned* new_owned(int64_t n, bool readonly) {
  void* block = std::malloc(sizeof(Owned) + sizeof(float) * (n > 0 ? n : 1));
  if (block == nullptr) return nullptr;
  auto* o = static_cast<Owned*>(block);
  for (int64_t i = 0; i < n; ++i) o->data[i] = 0.5f * float(i);
  o->shape[0] = n;
  o->strides[0] = 1;
  DLManagedTensorVersioned& m = o->managed;
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.manager_ctx = block;
  m.deleter = delete_owned;
  m.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  m.dl_tensor.data = o->data;
  m.dl_tensor.device = DLDevice{kDLCPU, 0};
  m.dl_tensor.ndim = 1;
  m.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  m.dl_tensor.shape = o->shape;
  m.dl_tensor.strides = o->strides;
  m.dl_tensor.byte_offset = 0;
  return &m;
}

// produce(n, readonly=False, major=1): a DLPackArray that owns a new tensor.
PyObject* produce(PyObject*, PyObject* args) {
  Py_ssize_t n;
  int readonly = 0;
  unsigned major = DLPACK_MAJOR_VERSION;
  if (!PyArg_ParseTuple(args, "n|pI", &n, &readonly, &major)) return nullptr;
  DLManagedTensorVersioned* m = new_owned(n, readonly != 0);
  if (m == nullptr) return PyErr_NoMemory();
  m->version.major = major;  // a wrong major is refused, and the tensor still deleted
  return DLPackArray_FromManagedVersioned(m);
}

// total(array) -> sum of a 1-D float32 DLPackArray, read through the borrowed DLTensor.
PyObject* total(PyObject*, PyObject* array) {
  DLTensor t;
  int readonly = 0;
  if (DLPackArray_GetDLTensor(array, &t, &readonly) < 0) return nullptr;
  if (t.ndim != 1 || t.dtype.code != kDLFloat || t.dtype.bits != 32) {
    PyErr_SetString(PyExc_TypeError, "expected a 1-D float32 array");
    return nullptr;
  }
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  double sum = 0;
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    sum += reinterpret_cast<const float*>(base)[i * t.strides[0]];
  }
  return PyFloat_FromDouble(sum);
}

// hand_over(array) -> (flags, new array): ToManagedVersioned then FromManagedVersioned.
PyObject* hand_over(PyObject*, PyObject* array) {
  DLManagedTensorVersioned* m = DLPackArray_ToManagedVersioned(array);
  if (m == nullptr) return nullptr;
  const unsigned long long flags = m->flags;
  PyObject* again = DLPackArray_FromManagedVersioned(m);
  if (again == nullptr) return nullptr;
  return Py_BuildValue("(KN)", flags, again);
}

PyObject* wrap(PyObject*, PyObject* args) {
  PyObject* obj;
  int copy = DLPACKARRAY_COPY_IF_NEEDED;
  PyObject* device = nullptr;
  if (!PyArg_ParseTuple(args, "O|iO", &obj, &copy, &device)) return nullptr;
  return DLPackArray_FromObject(obj, copy, device);
}

PyObject* borrow_data(PyObject*, PyObject* owner) {
  // A 2x2 uint8 view of a bytes object's data, kept alive by the bytes object.
  char* data;
  Py_ssize_t len;
  if (PyBytes_AsStringAndSize(owner, &data, &len) < 0) return nullptr;
  if (len < 4) {
    PyErr_SetString(PyExc_ValueError, "need 4 bytes");
    return nullptr;
  }
  const int64_t shape[2] = {2, 2};
  return DLPackArray_FromData(data, 2, shape, nullptr, DLDataType{kDLUInt, 8, 1},
                              DLDevice{kDLCPU, 0}, 1, owner, nullptr, nullptr);
}

PyObject* to_capsule(PyObject*, PyObject* args) {
  PyObject* array;
  int versioned;
  if (!PyArg_ParseTuple(args, "Op", &array, &versioned)) return nullptr;
  return DLPackArray_ToCapsule(array, versioned);
}

PyObject* check(PyObject*, PyObject* obj) { return PyBool_FromLong(DLPackArray_Check(obj)); }

PyObject* type(PyObject*, PyObject*) {
  PyTypeObject* t = DLPackArray_Type();
  if (t == nullptr) return nullptr;
  Py_INCREF(t);
  return reinterpret_cast<PyObject*>(t);
}

PyObject* deleted(PyObject*, PyObject*) { return PyLong_FromLong(g_deleted); }

PyObject* versions(PyObject*, PyObject*) {
  if (import_dlpackarray() < 0) return nullptr;
  return Py_BuildValue("(II)(II)", DLPackArray_API->major, DLPackArray_API->minor,
                       unsigned(DLPACKARRAY_C_API_MAJOR), unsigned(DLPACKARRAY_C_API_MINOR));
}

// ---- C API 1.1 ----

// empty(shape, code, bits, device_type=kDLCPU, device_id=0): a new C-contiguous array.
PyObject* empty(PyObject*, PyObject* args) {
  PyObject* shape_obj;
  int code, bits, device_type = kDLCPU, device_id = 0;
  if (!PyArg_ParseTuple(args, "O!ii|ii", &PyTuple_Type, &shape_obj, &code, &bits, &device_type,
                        &device_id)) {
    return nullptr;
  }
  int64_t shape[8];
  const Py_ssize_t ndim = PyTuple_GET_SIZE(shape_obj);
  if (ndim > 8) {
    PyErr_SetString(PyExc_ValueError, "at most 8 dimensions here");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, i));
    if (shape[i] == -1 && PyErr_Occurred()) return nullptr;
  }
  const DLDataType dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  const DLDevice device{static_cast<DLDeviceType>(device_type), device_id};
  return DLPackArray_Empty(static_cast<int32_t>(ndim), shape, dtype, device);
}

// is_contiguous(array, order): order is a one-character str ('C', 'F', or anything else).
PyObject* is_contiguous(PyObject*, PyObject* args) {
  PyObject* array;
  int order;
  if (!PyArg_ParseTuple(args, "OC", &array, &order)) return nullptr;
  const int r = DLPackArray_IsContiguous(array, static_cast<char>(order));
  if (r < 0) return nullptr;
  return PyBool_FromLong(r);
}

PyObject* as_contiguous(PyObject*, PyObject* array) { return DLPackArray_AsContiguous(array); }

// pair(a, b, n=0): both converted to DLPackArrays by "O&"; when a later
// argument fails, PyArg_ParseTuple calls the converter again to release them.
PyObject* pair(PyObject*, PyObject* args) {
  PyObject* a = nullptr;
  PyObject* b = nullptr;
  int n = 0;
  if (!PyArg_ParseTuple(args, "O&O&|i", DLPackArray_Converter, &a, DLPackArray_Converter, &b, &n)) {
    return nullptr;
  }
  return Py_BuildValue("(NNi)", a, b, n);
}

// on_stream(obj, stream, copy=-1): DLPackArray(obj, copy=..., stream=stream).
PyObject* on_stream(PyObject*, PyObject* args) {
  PyObject* obj;
  long long stream;
  int copy = DLPACKARRAY_COPY_IF_NEEDED;
  if (!PyArg_ParseTuple(args, "OL|i", &obj, &stream, &copy)) return nullptr;
  return DLPackArray_FromObjectOnStream(obj, copy, nullptr, static_cast<int64_t>(stream));
}

PyMethodDef methods[] = {
    {"empty", empty, METH_VARARGS, nullptr},
    {"is_contiguous", is_contiguous, METH_VARARGS, nullptr},
    {"as_contiguous", as_contiguous, METH_O, nullptr},
    {"pair", pair, METH_VARARGS, nullptr},
    {"on_stream", on_stream, METH_VARARGS, nullptr},
    {"produce", produce, METH_VARARGS, nullptr},
    {"total", total, METH_O, nullptr},
    {"hand_over", hand_over, METH_O, nullptr},
    {"wrap", wrap, METH_VARARGS, nullptr},
    {"borrow_data", borrow_data, METH_O, nullptr},
    {"to_capsule", to_capsule, METH_VARARGS, nullptr},
    {"check", check, METH_O, nullptr},
    {"type", type, METH_NOARGS, nullptr},
    {"deleted", deleted, METH_NOARGS, nullptr},
    {"versions", versions, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "extension", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_extension(void) {
  if (import_dlpackarray() < 0) return nullptr;
  return PyModule_Create(&module);
}
