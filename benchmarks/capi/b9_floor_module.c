/* B9's floors: the least any implementation can do on an Arrow route.
 *
 * - Producer(buffer): wraps a C-contiguous 1-D float32/float64 buffer (one
 *   PyObject_GetBuffer) and exports it through __arrow_c_schema__,
 *   __arrow_c_array__ and __arrow_c_device_array__ with nothing more than the
 *   spec asks: two malloc'ed structs in two capsules, static format strings,
 *   a strong reference to the producer that the array's release drops (under
 *   the GIL, as a release may run on any thread).  No validation beyond the
 *   buffer request, no options: the floor of an export, not a contender.
 *   __arrow_c_stream__ hands out the same array as a one-chunk stream.
 * - TensorProducer(buffer): the same for a C-contiguous 2-D to 8-D float32
 *   buffer, exported as an arrow.fixed_shape_tensor column (format and
 *   extension metadata built once per producer).
 * - consume_arrow(obj): the least an Arrow importer does: calls
 *   obj.__arrow_c_array__(), checks the two capsule names, moves the array
 *   out of its capsule into a new owner object (released when the owner
 *   dies) and reads the data pointer of the leaf's buffer 1 (through a
 *   tensor's fixed-size list levels).
 * - ArrowSpecWrap(obj): the least an Arrow consumer that yields an array can
 *   do: one vectorcall of obj.__arrow_c_array__(), then the checks the C data
 *   interface leaves to a consumer of a primitive column read as a tensor
 *   (capsule names, not yet released, a fixed-width primitive format without
 *   children or dictionary, the array's buffer and child counts, offset and
 *   length in range, no nulls: counted when null_count is -1), the struct
 *   moved into the object itself, and bf_getbuffer answered (1-D, read-only).
 *   The floor of a conforming Arrow import, not a consumer.
 * - consume_arrow_device(obj): the same through obj.__arrow_c_device_array__(),
 *   which a consumer that takes device data calls first (the PyCapsule
 *   interface), refusing anything but CPU memory without a sync event: the
 *   floor of a device-aware import of host data, not a consumer.
 *
 * - DLPackBufferWrap(obj): the least a wrapper that NumPy reads through the
 *   buffer protocol (the first protocol np.asarray tries for an object that
 *   is not an ndarray) can do: calls obj.__dlpack__(max_version=(1, 3)) with
 *   one vectorcall (name, kwnames and version built once), keeps the
 *   versioned capsule (renamed "used_dltensor_versioned", its deleter called
 *   on dealloc) and answers bf_getbuffer from the DLTensor.  Validates
 *   nothing: host data, int/uint/float/bool dtypes of whole bytes, at most
 *   WRAP_MAX_NDIM dimensions; the floor of np.asarray(DLPackArray(x)).
 * - DLPackSpecWrap(obj): the same wrapper doing what the DLPack Python spec
 *   asks of a consumer that is not host-only: obj.__dlpack_device__() first
 *   (the device decides the stream argument; host data takes none), then
 *   __dlpack__, then the capsule checks the spec names (name, major
 *   version, the device the query reported, dtype and lanes).  Refuses
 *   non-CPU data instead of choosing a stream: the floor of a conforming
 *   import of host data, not a consumer.
 *
 * The module's parts: b9_floor_arrow_producer.c (Producer, HostProducer,
 * TensorProducer), b9_floor_arrow_consumer.c (consume_arrow,
 * consume_arrow_device, ArrowSpecWrap), b9_floor_dlpack.c (DLPackBufferWrap,
 * DLPackSpecWrap); this file holds the module table and its init.
 */
#include "b9_floor.h"

static PyMethodDef module_methods[] = {
    {"consume_arrow", b9_consume_arrow, METH_O, NULL},
    {"consume_arrow_device", b9_consume_arrow_device, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "b9_floor", NULL, -1, module_methods,
};

PyMODINIT_FUNC PyInit_b9_floor(void) {
  if (PyType_Ready(&b9_ProducerType) < 0 || PyType_Ready(&b9_HostProducerType) < 0 ||
      PyType_Ready(&b9_TensorProducerType) < 0 || PyType_Ready(&b9_DLPackBufferWrapType) < 0 ||
      PyType_Ready(&b9_DLPackSpecWrapType) < 0 || PyType_Ready(&b9_ArrowSpecWrapType) < 0)
    return NULL;
  b9_dlpack_name = PyUnicode_InternFromString("__dlpack__");
  /* Interned, as a compiled consumer's string constants are (Cython's, ours):
   * a Cython producer's keyword parser then matches the name by pointer; an
   * uninterned one costs it a string comparison (~110 instructions), which
   * no consumer needs to pay. */
  PyObject* max_version_name = PyUnicode_InternFromString("max_version");
  b9_dlpack_kwnames = max_version_name == NULL ? NULL : PyTuple_Pack(1, max_version_name);
  Py_XDECREF(max_version_name);
  b9_dlpack_max_version = Py_BuildValue("(ii)", 1, 3);
  b9_dlpack_device_name = PyUnicode_InternFromString("__dlpack_device__");
  b9_arrow_array_name = PyUnicode_InternFromString("__arrow_c_array__");
  b9_arrow_device_array_name = PyUnicode_InternFromString("__arrow_c_device_array__");
  if (b9_dlpack_name == NULL || b9_dlpack_kwnames == NULL || b9_dlpack_max_version == NULL ||
      b9_dlpack_device_name == NULL || b9_arrow_array_name == NULL ||
      b9_arrow_device_array_name == NULL)
    return NULL;
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  Py_INCREF(&b9_ProducerType);
  Py_INCREF(&b9_HostProducerType);
  Py_INCREF(&b9_TensorProducerType);
  Py_INCREF(&b9_DLPackBufferWrapType);
  Py_INCREF(&b9_DLPackSpecWrapType);
  Py_INCREF(&b9_ArrowSpecWrapType);
  if (PyModule_AddObject(m, "Producer", (PyObject*)&b9_ProducerType) < 0 ||
      PyModule_AddObject(m, "HostProducer", (PyObject*)&b9_HostProducerType) < 0 ||
      PyModule_AddObject(m, "TensorProducer", (PyObject*)&b9_TensorProducerType) < 0 ||
      PyModule_AddObject(m, "DLPackBufferWrap", (PyObject*)&b9_DLPackBufferWrapType) < 0 ||
      PyModule_AddObject(m, "DLPackSpecWrap", (PyObject*)&b9_DLPackSpecWrapType) < 0 ||
      PyModule_AddObject(m, "ArrowSpecWrap", (PyObject*)&b9_ArrowSpecWrapType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
