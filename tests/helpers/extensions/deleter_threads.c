/* Calls DLPack deleters (and Arrow release callbacks) the way foreign C code
 * does: from threads that are not Python threads and do not hold the GIL,
 * racing interpreter shutdown, or while a Python exception is set.  Used by
 * tests/lifetime/test_soak.py; built by tests/adversarial/build_ext.py.
 *
 * The managed tensors are passed as integer addresses of
 * DLManagedTensorVersioned structs (taken out of their capsules by the
 * tests, which then own them).  Only the deleter field is used; its offset
 * is fixed by the DLPack ABI: version (8 bytes), manager_ctx, deleter.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct Managed {
  uint32_t major, minor;
  void *manager_ctx;
  void (*deleter)(struct Managed *self);
} Managed;

typedef struct {
  Managed **tensors;
  Py_ssize_t count;
  long delay_us;
} Batch;

static void sleep_us(long us) {
  if (us <= 0) return;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void *run_batch(void *arg) {
  Batch *b = (Batch *)arg;
  sleep_us(b->delay_us);
  for (Py_ssize_t i = 0; i < b->count; ++i) {
    if (b->tensors[i]->deleter != NULL) b->tensors[i]->deleter(b->tensors[i]);
  }
  return NULL;
}

/* "O&" converter: a non-NULL address given as an int. */
static int address_of(PyObject *obj, void *out) {
  void *p = PyLong_AsVoidPtr(obj);
  if (p == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "NULL address");
    return 0;
  }
  *(void **)out = p;
  return 1;
}

static int read_addresses(PyObject *list, Managed ***out, Py_ssize_t *count) {
  if (!PyList_Check(list)) {
    PyErr_SetString(PyExc_TypeError, "expected a list of addresses");
    return -1;
  }
  *count = PyList_GET_SIZE(list);
  *out = malloc(sizeof(Managed *) * (size_t)(*count > 0 ? *count : 1));
  if (*out == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < *count; ++i) {
    (*out)[i] = PyLong_AsVoidPtr(PyList_GET_ITEM(list, i));
    if ((*out)[i] == NULL) {
      free(*out);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "NULL address");
      return -1;
    }
  }
  return 0;
}

/* delete_detached(addresses, delay_us): one detached pthread per tensor, each
 * sleeping up to delay_us before calling the deleter; returns at once, so the
 * deleters race whatever the interpreter does next (e.g. shutting down). */
static PyObject *delete_detached(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  long delay_us;
  if (!PyArg_ParseTuple(args, "Ol", &list, &delay_us)) return NULL;
  Managed **tensors;
  Py_ssize_t count;
  if (read_addresses(list, &tensors, &count) < 0) return NULL;
  for (Py_ssize_t i = 0; i < count; ++i) {
    /* Leaked on purpose: the thread may outlive everything else. */
    Batch *b = malloc(sizeof(Batch));
    Managed **one = malloc(sizeof(Managed *));
    if (b == NULL || one == NULL) {
      free(b);
      free(one);
      break;
    }
    one[0] = tensors[i];
    *b = (Batch){one, 1, delay_us > 0 ? (long)(i * 7919 % (delay_us + 1)) : 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, run_batch, b) != 0) break;
    pthread_detach(thread);
  }
  free(tensors);
  Py_RETURN_NONE;
}

typedef struct {
  void (*release)(void *);
  void *arg;
  long delay_us;
} Call;

static void *run_call(void *arg) {
  Call *c = (Call *)arg;
  sleep_us(c->delay_us);
  c->release(c->arg);
  return NULL;
}

/* release_detached(pairs, delay_us): pairs is a list of (release, argument)
 * addresses, e.g. an Arrow struct's release callback and the struct; one
 * detached pthread per pair calls release(argument) after up to delay_us,
 * spread as in delete_detached.  Returns at once. */
static PyObject *release_detached(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  long delay_us;
  if (!PyArg_ParseTuple(args, "O!l", &PyList_Type, &list, &delay_us)) return NULL;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    void *release, *target;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "O&O&", address_of, &release, address_of,
                          &target))
      return NULL;
    /* Leaked on purpose: the thread may outlive everything else. */
    Call *c = malloc(sizeof(Call));
    if (c == NULL) return PyErr_NoMemory();
    *c = (Call){(void (*)(void *))release, target,
                delay_us > 0 ? (long)(i * 7919 % (delay_us + 1)) : 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, run_call, c) != 0) {
      free(c);
      PyErr_SetString(PyExc_OSError, "pthread_create failed");
      return NULL;
    }
    pthread_detach(thread);
  }
  Py_RETURN_NONE;
}

typedef struct {
  Call *calls;
  Py_ssize_t count;
} CallBatch;

static void *run_call_batch(void *arg) {
  CallBatch *b = (CallBatch *)arg;
  for (Py_ssize_t i = 0; i < b->count; ++i) b->calls[i].release(b->calls[i].arg);
  return NULL;
}

/* Splits the calls over nthreads pthreads that make them without the GIL, all
 * at once, and joins them with the GIL released (the calls take it).  Frees
 * `calls`.  Returns how many threads ran, or NULL with an error set. */
static PyObject *run_calls_in_threads(Call *calls, Py_ssize_t count, int nthreads) {
  if (nthreads < 1 || nthreads > 256) {
    free(calls);
    PyErr_SetString(PyExc_ValueError, "nthreads must be in 1..256");
    return NULL;
  }
  pthread_t threads[256];
  CallBatch batches[256];
  Py_ssize_t per = (count + nthreads - 1) / nthreads;
  int started = 0;
  for (int t = 0; t < nthreads; ++t) {
    Py_ssize_t lo = t * per, hi = lo + per < count ? lo + per : count;
    if (lo >= hi) break;
    batches[t] = (CallBatch){calls + lo, hi - lo};
    if (pthread_create(&threads[t], NULL, run_call_batch, &batches[t]) != 0) break;
    started++;
  }
  Py_BEGIN_ALLOW_THREADS for (int t = 0; t < started; ++t) pthread_join(threads[t], NULL);
  Py_END_ALLOW_THREADS free(calls);
  return PyLong_FromLong(started);
}

static void call_deleter(void *tensor) {
  Managed *m = (Managed *)tensor;
  if (m->deleter != NULL) m->deleter(m);
}

/* delete_in_threads(addresses, nthreads): splits the tensors over nthreads
 * pthreads that call the deleters without the GIL (run_calls_in_threads). */
static PyObject *delete_in_threads(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  int nthreads;
  if (!PyArg_ParseTuple(args, "Oi", &list, &nthreads)) return NULL;
  Managed **tensors;
  Py_ssize_t count;
  if (read_addresses(list, &tensors, &count) < 0) return NULL;
  Call *calls = malloc(sizeof(Call) * (size_t)(count > 0 ? count : 1));
  if (calls == NULL) {
    free(tensors);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < count; ++i) calls[i] = (Call){call_deleter, tensors[i], 0};
  free(tensors);
  return run_calls_in_threads(calls, count, nthreads);
}

/* release_in_threads(pairs, nthreads): pairs as in release_detached, each
 * release(argument) made as in delete_in_threads. */
static PyObject *release_in_threads(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *list;
  int nthreads;
  if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &list, &nthreads)) return NULL;
  Py_ssize_t count = PyList_GET_SIZE(list);
  Call *calls = malloc(sizeof(Call) * (size_t)(count > 0 ? count : 1));
  if (calls == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < count; ++i) {
    void *release, *target;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(list, i), "O&O&", address_of, &release, address_of,
                          &target)) {
      free(calls);
      return NULL;
    }
    calls[i] = (Call){(void (*)(void *))release, target, 0};
  }
  return run_calls_in_threads(calls, count, nthreads);
}

/* Whether the ValueError("in flight") the caller set is still the error set
 * (True or False); clears whatever is set. */
static PyObject *in_flight_still_set(void) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  int kept = type == PyExc_ValueError && value != NULL;
  if (kept) {
    PyObject *text = PyObject_Str(value);
    kept = text != NULL && PyUnicode_CompareWithASCIIString(text, "in flight") == 0;
    Py_XDECREF(text);
    PyErr_Clear();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return PyBool_FromLong(kept);
}

/* delete_with_error_set(address): calls the deleter while a ValueError is
 * set, as happens when an owner dies during exception propagation.  Returns
 * True when the same exception is still set afterwards (then cleared). */
static PyObject *delete_with_error_set(PyObject *self, PyObject *arg) {
  (void)self;
  Managed *m = PyLong_AsVoidPtr(arg);
  if (m == NULL) return NULL;
  PyErr_SetString(PyExc_ValueError, "in flight");
  m->deleter(m);
  return in_flight_still_set();
}

/* A deleter that leaves an error set, for a consumer's capsule destructor to
 * discard.  set_error_after_deleter(capsule) wraps the deleter of a
 * "dltensor_versioned" capsule's tensor; wrapped_deleter_calls() counts the
 * wrapped deleters run. */
#define WRAP_SLOTS 64
static struct {
  Managed *m;
  void (*deleter)(Managed *);
} wrapped[WRAP_SLOTS];
static long wrapped_calls;

static void error_setting_deleter(Managed *m) {
  for (int i = 0; i < WRAP_SLOTS; ++i) {
    if (wrapped[i].m == m) {
      wrapped[i].m = NULL;
      wrapped[i].deleter(m);
      break;
    }
  }
  ++wrapped_calls;
  PyErr_SetString(PyExc_RuntimeError, "set by a deleter");
}

static PyObject *set_error_after_deleter(PyObject *self, PyObject *capsule) {
  (void)self;
  Managed *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (m == NULL) return NULL;
  for (int i = 0; i < WRAP_SLOTS; ++i) {
    if (wrapped[i].m == NULL) {
      wrapped[i].m = m;
      wrapped[i].deleter = m->deleter;
      m->deleter = error_setting_deleter;
      Py_RETURN_NONE;
    }
  }
  PyErr_SetString(PyExc_RuntimeError, "no free slot");
  return NULL;
}

static PyObject *wrapped_deleter_calls(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(wrapped_calls);
}

/* drop_with_error_set(list): drops the list's only item (its last reference)
 * while a ValueError is set, as when an owner dies during exception
 * propagation.  Returns True when that same exception is still set
 * afterwards (then cleared). */
static PyObject *drop_with_error_set(PyObject *self, PyObject *list) {
  (void)self;
  if (!PyList_Check(list) || PyList_GET_SIZE(list) != 1) {
    PyErr_SetString(PyExc_TypeError, "expected a list of one item");
    return NULL;
  }
  PyObject *item = Py_NewRef(PyList_GET_ITEM(list, 0));
  if (PyList_SetSlice(list, 0, 1, NULL) != 0) {
    Py_DECREF(item);
    return NULL;
  }
  PyErr_SetString(PyExc_ValueError, "in flight");
  Py_DECREF(item);
  return in_flight_still_set();
}

/* error_left_set(): whether the error indicator is set on entry (a
 * destructor that ran before this call left one); clears it. */
static PyObject *error_left_set(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int set = PyErr_Occurred() != NULL;
  PyErr_Clear();
  return PyBool_FromLong(set);
}

static PyMethodDef methods[] = {
    {"delete_in_threads", delete_in_threads, METH_VARARGS, "deleters from pthreads, joined"},
    {"delete_detached", delete_detached, METH_VARARGS, "deleters from detached pthreads"},
    {"release_detached", release_detached, METH_VARARGS, "release callbacks from detached pthreads"},
    {"release_in_threads", release_in_threads, METH_VARARGS, "release callbacks from pthreads, joined"},
    {"delete_with_error_set", delete_with_error_set, METH_O, "deleter with an error set"},
    {"set_error_after_deleter", set_error_after_deleter, METH_O, "deleter that sets an error"},
    {"wrapped_deleter_calls", wrapped_deleter_calls, METH_NOARGS, "wrapped deleters run"},
    {"drop_with_error_set", drop_with_error_set, METH_O, "last reference dropped, error set"},
    {"error_left_set", error_left_set, METH_NOARGS, "error indicator set on entry"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "deleter_threads",
                                    "DLPack deleters from foreign threads.", -1, methods};

PyMODINIT_FUNC PyInit_deleter_threads(void) { return PyModule_Create(&module); }
