# cython: language_level=3
# A pure declaration (no module behind it): a stack of dead instances of one
# static extension type, which its tp_alloc hands out again without the
# allocator's call and without the zeroing of Cython's freelist (which clears
# every byte of a reused instance, although tp_new writes nearly all of them
# again).  DLPackArray (_array.pyx) and ArrowArrayOwner (_arrow.pyx), one of
# each made and dropped by every exchange, keep one each.
#
# The rule of which instances are kept lives here, once: only the exact type
# the stack was installed on, allocated with no items.  Subclasses (heap
# types) do not inherit tp_alloc/tp_free, but a subclass's instance can still
# reach a base slot through an explicit call, so the exact type is checked on
# both sides; everything else goes to the slots the type had before.
from cpython.object cimport PyObject, PyTypeObject

# The allocation slots, which Cython's PyTypeObject does not declare.
ctypedef PyObject* (*AllocFunc)(PyTypeObject* t, Py_ssize_t n) noexcept
ctypedef void (*FreeFunc)(void* o) noexcept

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
      PyTypeObject* type;  /* the exact type kept; NULL before install */
      allocfunc alloc;     /* the type's own slots, for everything else */
      freefunc free;
      PyObject* slots[DLA_RECYCLED_MAX > 0 ? DLA_RECYCLED_MAX : 1];
    } dla_recycler;

    /* Puts `alloc`/`free` in `t`'s slots, keeping the ones they replace. */
    static inline void dla_recycler_install(dla_recycler* r, PyTypeObject* t,
                                            allocfunc alloc, freefunc free) {
      r->type = t;
      r->alloc = t->tp_alloc;
      r->free = t->tp_free;
      t->tp_alloc = alloc;
      t->tp_free = free;
    }

    /* tp_alloc(t, n) for the stack's type: a kept instance, alive again as a
       `t` with one reference and no weak references, its other bytes as its
       tp_dealloc left them; else the type's own tp_alloc, when none is kept
       or `t`/`n` is not what this stack keeps.  Unlike PyType_GenericAlloc's,
       a kept instance of a GC type comes back untracked: its module tracks it
       once it holds something that can lead back to it (DLPackArray's
       mark_ready), which most never do. */
    static inline PyObject* dla_recycler_alloc(dla_recycler* r, PyTypeObject* t,
                                               Py_ssize_t n) {
      if (t != r->type || n != 0 || r->count <= 0) return r->alloc(t, n);
      PyObject* o = r->slots[--r->count];
    #if defined(Py_REF_DEBUG) || defined(Py_TRACE_REFS) || defined(Py_GIL_DISABLED)
      /* Debug and free-threaded builds keep counts of their own. */
      (void)PyObject_Init(o, t);
    #else
      /* PyObject_Init's work for a static type, which takes no reference. */
      Py_SET_TYPE(o, t);
      Py_SET_REFCNT(o, 1);
    #endif
      if (t->tp_weaklistoffset > 0) {
        *(PyObject**)((char*)o + t->tp_weaklistoffset) = NULL;
      }
      return o;
    }

    /* tp_free for the stack's type: keeps `o` (an instance its tp_dealloc is
       done with, untracked and cleared) or hands it to the type's own
       tp_free when it is of another type or the stack is full. */
    static inline void dla_recycler_free(dla_recycler* r, PyObject* o) {
      if (Py_TYPE(o) == r->type && r->count < DLA_RECYCLED_MAX) {
        r->slots[r->count++] = o;
        return;
      }
      r->free(o);
    }
    """
    ctypedef struct Recycler "dla_recycler":
        int count
    void recycler_install "dla_recycler_install"(Recycler* r, PyTypeObject* t, AllocFunc alloc,
                                                 FreeFunc free) noexcept
    PyObject* recycler_alloc "dla_recycler_alloc"(Recycler* r, PyTypeObject* t,
                                                  Py_ssize_t n) noexcept
    void recycler_free "dla_recycler_free"(Recycler* r, PyObject* o) noexcept
