# cython: language_level=3
# A pure declaration (no module behind it): a stack of dead instances of one
# static extension type, which its tp_alloc hands out again without the
# allocator's call and without the zeroing of Cython's freelist (which clears
# every byte of a reused instance, although tp_new writes nearly all of them
# again).  DLPackArray (_array.pyx) and ArrowArrayOwner (_arrow.pyx), one of
# each made and dropped by every exchange, keep one each.  Subclasses (heap
# types) keep CPython's allocator: tp_alloc and tp_free are not inherited by
# them, and each allocator checks the exact type as well.
from cpython.object cimport PyObject, PyTypeObject

cdef extern from *:
    """
    /* A free-threaded build has no GIL to guard the stack: it keeps none (as
       Cython's own freelists do there). */
    #if defined(Py_GIL_DISABLED)
    #define DLA_RECYCLED_MAX 0
    #else
    #define DLA_RECYCLED_MAX 16
    #endif
    typedef struct {
      int count;
      PyObject* slots[DLA_RECYCLED_MAX > 0 ? DLA_RECYCLED_MAX : 1];
    } dla_recycler;

    /* A kept instance, alive again as a `t` with one reference (PyObject_Init's
       work for a static type, which takes no reference to it; debug and
       free-threaded builds keep counts of their own, so they call it), its
       other bytes as its tp_dealloc left them; NULL when none is kept. */
    static inline PyObject* dla_recycler_pop(dla_recycler* r, PyTypeObject* t) {
      if (r->count <= 0) return NULL;
      PyObject* o = r->slots[--r->count];
    #if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
      (void)PyObject_Init(o, t);
    #else
      Py_SET_TYPE(o, t);
      Py_SET_REFCNT(o, 1);
    #endif
      return o;
    }

    /* Keeps `o`, an instance its tp_dealloc is done with; 0 when full. */
    static inline int dla_recycler_push(dla_recycler* r, PyObject* o) {
      if (r->count >= DLA_RECYCLED_MAX) return 0;
      r->slots[r->count++] = o;
      return 1;
    }
    """
    ctypedef struct Recycler "dla_recycler":
        int count
    PyObject* recycler_pop "dla_recycler_pop"(Recycler* r, PyTypeObject* t) noexcept
    bint recycler_push "dla_recycler_push"(Recycler* r, PyObject* o) noexcept

# The allocation slots, which Cython's PyTypeObject does not declare.
ctypedef PyObject* (*AllocFunc)(PyTypeObject* t, Py_ssize_t n) noexcept
ctypedef void (*FreeFunc)(void* o) noexcept

cdef extern from "Python.h":
    ctypedef struct AllocType "PyTypeObject":
        AllocFunc tp_alloc
        FreeFunc tp_free
        Py_ssize_t tp_weaklistoffset
    PyObject* PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t n) noexcept
