# cython: language_level=3
# A pure declaration (no module behind it): the direct-mapped per-type cache
# that the exchange-table lookup (_exchange.pyx) and the Arrow probes
# (_arrow.pyx) put in front of their attribute lookups, so that a repeated
# import costs a C-level probe, negative answers included.
from cpython.object cimport PyTypeObject
from libc.stdint cimport intptr_t, uintptr_t

cdef extern from *:
    """
    /* A type's version tag changes (or becomes 0) whenever the type or one of
       its bases is modified, so (type, tag) identifies one state of a type:
       a cached answer is valid exactly while both match. */
    static inline unsigned int dla_type_version(PyTypeObject* t) { return t->tp_version_tag; }
    /* Without a GIL nothing serialises a cache: every lookup is made afresh. */
    #ifdef Py_GIL_DISABLED
    #define DLA_CACHE_TYPES 0
    #else
    #define DLA_CACHE_TYPES 1
    #endif
    """
    const bint DLA_CACHE_TYPES
    unsigned int dla_type_version(PyTypeObject* t)

cdef enum:
    TYPE_CACHE_SIZE = 64

# One entry: the answer (a flag, a mask or a pointer) for one state of a type.
cdef struct TypeSlot:
    PyTypeObject* type
    unsigned int version
    intptr_t value


cdef inline TypeSlot* type_slot(TypeSlot* table, PyTypeObject* tp) noexcept:
    """``tp``'s entry in a table of TYPE_CACHE_SIZE slots."""
    return &table[(<uintptr_t>tp >> 4) % TYPE_CACHE_SIZE]


cdef inline bint type_slot_hit(const TypeSlot* slot, PyTypeObject* tp) noexcept:
    """Whether ``slot`` holds the answer for ``tp`` in its current state."""
    cdef unsigned int version = dla_type_version(tp)
    return DLA_CACHE_TYPES and version != 0 and slot.type == tp and slot.version == version


cdef inline void type_slot_store(TypeSlot* slot, PyTypeObject* tp, intptr_t value) noexcept:
    """Remembers ``value`` for ``tp``'s current state, read after the lookup
    (an attribute lookup may assign a version tag; 0: the type cannot be
    cached)."""
    cdef unsigned int version = dla_type_version(tp)
    if DLA_CACHE_TYPES and version != 0:
        slot.type = tp
        slot.version = version
        slot.value = value
