/* What the parts of the B9 floor module share (b9_floor_module.c: the floors
 * and which file holds each): the Arrow structs, the wrapper types one file
 * lends another, the names interned at init and the wrappers' argument
 * checks. */
#ifndef B9_FLOOR_H
#define B9_FLOOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpackarray/dlpack_abi.h"

/* Struct layouts follow the Arrow C data and C device data interfaces and
 * DLPack 1.x. */
struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

#define ARROW_DEVICE_CPU 1

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  int32_t device_type;
  void* sync_event;
  int64_t reserved[3];
};

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema*);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray*);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

/* What one file lends another is hidden, as a static would be: the module
 * exports PyInit_b9_floor alone. */
#pragma GCC visibility push(hidden)

/* b9_floor_arrow_producer.c */
extern PyTypeObject b9_ProducerType;
extern PyTypeObject b9_HostProducerType;
extern PyTypeObject b9_TensorProducerType;

/* b9_floor_dlpack.c; the names are built in the module's init. */
extern PyTypeObject b9_DLPackBufferWrapType;
extern PyTypeObject b9_DLPackSpecWrapType;
extern PyObject* b9_dlpack_name;        /* "__dlpack__" */
extern PyObject* b9_dlpack_kwnames;     /* ("max_version",) */
extern PyObject* b9_dlpack_max_version; /* (1, 3) */
extern PyObject* b9_dlpack_device_name; /* "__dlpack_device__" */

/* b9_floor_arrow_consumer.c; the names are interned in the module's init. */
extern PyTypeObject b9_ArrowSpecWrapType;
extern PyObject* b9_arrow_array_name;        /* "__arrow_c_array__" */
extern PyObject* b9_arrow_device_array_name; /* "__arrow_c_device_array__" */
PyObject* b9_consume_arrow(PyObject* mod, PyObject* obj);
PyObject* b9_consume_arrow_device(PyObject* mod, PyObject* obj);

#pragma GCC visibility pop

/* A wrapper type takes one positional argument.  Each type's constructors
 * live in the file of its own constructor, so a floor's call path stays in
 * one translation unit (what a compiler may inline, as in a consumer's own
 * code); these give them the argument, or NULL with the TypeError. */
static inline PyObject* b9_only_argument(PyObject* type, PyObject* const* args, size_t nargsf,
                                         PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
    PyErr_Format(PyExc_TypeError, "%s takes one positional argument",
                 ((PyTypeObject*)type)->tp_name);
    return NULL;
  }
  return args[0];
}

/* The same for calls that bring an argument tuple (PyObject_Call). */
static inline PyObject* b9_only_item(PyTypeObject* type, PyObject* args, PyObject* kw) {
  if ((kw != NULL && PyDict_GET_SIZE(kw) != 0) || PyTuple_GET_SIZE(args) != 1) {
    PyErr_Format(PyExc_TypeError, "%s takes one positional argument", type->tp_name);
    return NULL;
  }
  return PyTuple_GET_ITEM(args, 0);
}

#endif
