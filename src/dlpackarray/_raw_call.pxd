# cython: language_level=3
# A pure declaration (no module behind it): hot calls that may fail, made so
# that only a failure enters an exception handler.  Cython saves the thread's
# exception state on entering every try/except, whether anything is raised or
# not; a call made raw here returns NULL with its error set, and the caller's
# handler, entered on that path only, takes the error through raise_pending().
from cpython.object cimport PyObject

cdef extern from *:
    """
    /* -1 as an error return: the exception a raw call left set propagates
       from its call through Cython's error handling (a try/except sees it as
       raised there). */
    static inline int dla_raise_pending(void) { return -1; }
    /* A new reference taken over (NULL: the error set propagates). */
    #define dla_steal(p) (p)
    """
    int raise_pending "dla_raise_pending"() except -1
    object steal "dla_steal"(PyObject* p)
    # A new reference, or NULL with the error set.
    PyObject* vectorcall_method "PyObject_VectorcallMethod"(
        object name, PyObject** args, size_t nargsf, PyObject* kwnames)
