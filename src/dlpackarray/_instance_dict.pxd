# cython: language_level=3
# A pure declaration (no module behind it): reading an object's own attribute
# storage without the full attribute lookup, for _import_into's probes of
# __cuda_array_interface__, __array_struct__ and __array_interface__.  Where
# the type's attribute lookup is the generic one and its MRO defines none of
# the names, only the instance's storage can supply them; these helpers read
# that storage as CPython's generic lookup does, but without creating
# anything: PyObject_GenericGetDict (and, for a managed dict,
# _PyObject_GetDictPtr) would build a dict from 3.11+'s inline values,
# making the object bigger and its attribute reads slower.
from cpython.object cimport PyObject, PyTypeObject

cdef extern from *:
    """
    #include <stdint.h>
    /* 3.11-3.13 with a GIL keep a heap instance's attributes in a "managed
       dict": inline values named by the type's shared keys, or a dict.
       Their layout (Include/internal) differs in each version and is read
       only there; elsewhere such types keep the full lookup. */
    #if !defined(Py_LIMITED_API) && !defined(Py_GIL_DISABLED)
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000
    #define DLA_MANAGED_DICTS 1
    #endif
    #endif
    #ifndef DLA_MANAGED_DICTS
    #define DLA_MANAGED_DICTS 0
    #endif

    /* Where instances of a type keep their attributes. */
    enum {
      DLA_ATTRS_GETATTR = 0, /* not readable here: the full getattr */
      DLA_ATTRS_NONE = 1,    /* nowhere: no instance dict */
      DLA_ATTRS_DICT = 2,    /* a dict at tp_dictoffset (every class on 3.10) */
      DLA_ATTRS_MANAGED = 3  /* a managed dict (3.11-3.13) */
    };

    static inline int dla_attr_storage(PyTypeObject* t) {
    #ifdef Py_LIMITED_API
      return DLA_ATTRS_GETATTR;
    #else
      /* Any other tp_getattro (__getattr__, __getattribute__, C types'
         own) may answer from anywhere. */
      if (t->tp_getattro != PyObject_GenericGetAttr) return DLA_ATTRS_GETATTR;
    #if PY_VERSION_HEX >= 0x030B0000
      if (t->tp_flags & Py_TPFLAGS_MANAGED_DICT)
        return DLA_MANAGED_DICTS ? DLA_ATTRS_MANAGED : DLA_ATTRS_GETATTR;
    #endif
      return t->tp_dictoffset == 0 ? DLA_ATTRS_NONE : DLA_ATTRS_DICT;
    #endif
    }

    /* obj's dict (borrowed; NULL: none), or through *inline_values that its
       attributes are inline values named by its type's shared keys: the
       branches of CPython's _PyObject_GenericGetAttrWithDict, in its order. */
    static inline PyObject* dla_instance_dict(PyObject* obj, int storage, int* inline_values) {
      *inline_values = 0;
    #ifndef Py_LIMITED_API
      if (storage == DLA_ATTRS_DICT) {
        /* Without a managed dict this only computes the slot's address. */
        PyObject** slot = _PyObject_GetDictPtr(obj);
        return slot ? *slot : NULL;
      }
    #endif
    #if DLA_MANAGED_DICTS && PY_VERSION_HEX < 0x030C0000
      /* 3.11: values pointer at word -4, dict at word -3. */
      if (((void**)obj)[-4] != NULL) { *inline_values = 1; return NULL; }
      return ((PyObject**)obj)[-3];
    #elif DLA_MANAGED_DICTS && PY_VERSION_HEX < 0x030D0000
      /* 3.12: word -3 is the values pointer less one (odd) or the dict. */
      uintptr_t dorv = ((uintptr_t*)obj)[-3];
      if (dorv & 1) { *inline_values = 1; return NULL; }
      return (PyObject*)dorv;
    #elif DLA_MANAGED_DICTS
      /* 3.13: values after the object, their 4th byte the "valid" flag
         (cleared when a dict takes them over); dict at word -3. */
      PyTypeObject* t = Py_TYPE(obj);
      if ((t->tp_flags & Py_TPFLAGS_INLINE_VALUES) &&
          ((const uint8_t*)obj + t->tp_basicsize)[3]) {
        *inline_values = 1;
        return NULL;
      }
      return ((PyObject**)obj)[-3];
    #else
      return NULL;
    #endif
    }

    /* The head of PyDictKeysObject (3.11-3.13 with a GIL), which a type's
       shared keys (ht_cached_keys) are: the names of its instances' inline
       values, only ever appended (a deleted attribute clears its value). */
    typedef struct {
      Py_ssize_t dk_refcnt;
      uint8_t dk_log2_size;
      uint8_t dk_log2_index_bytes;
      uint8_t dk_kind; /* 2: DICT_KEYS_SPLIT, str keys */
      uint32_t dk_version;
      Py_ssize_t dk_usable;
      Py_ssize_t dk_nentries;
      /* then the index table, 1 << dk_log2_index_bytes bytes, then the
         entries, {key, value} each */
    } dla_keys_head;

    static inline const dla_keys_head* dla_shared_keys(PyTypeObject* t) {
    #if DLA_MANAGED_DICTS
      if ((t->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0) {
        const dla_keys_head* k = (const dla_keys_head*)((PyHeapTypeObject*)t)->ht_cached_keys;
        if (k != NULL && k->dk_kind == 2) return k;
      }
    #endif
      (void)t;
      return NULL;
    }

    /* How many names t's shared keys hold (-1: unreadable). */
    static inline Py_ssize_t dla_shared_key_count(PyTypeObject* t) {
      const dla_keys_head* k = dla_shared_keys(t);
      return k != NULL ? k->dk_nentries : -1;
    }

    /* Whether t's shared keys lack all of a, b and c. */
    static inline int dla_shared_keys_lack(PyTypeObject* t, PyObject* a, PyObject* b,
                                           PyObject* c) {
      const dla_keys_head* k = dla_shared_keys(t);
      if (k == NULL) return 0;
      PyObject* const* entries =
          (PyObject* const*)((const char*)(k + 1) + ((size_t)1 << k->dk_log2_index_bytes));
      PyObject* names[3] = {a, b, c};
      for (Py_ssize_t i = 0; i < k->dk_nentries; i++) {
        PyObject* key = entries[2 * i];
        if (key == NULL) continue;
        for (int j = 0; j < 3; j++)
          /* str against str: cannot fail */
          if (key == names[j] || PyUnicode_Compare(key, names[j]) == 0) return 0;
      }
      return 1;
    }

    /* d[name] as the generic lookup reads an instance dict (no __missing__;
       an AttributeError from a key's __eq__ reads as absent); None when
       absent. */
    static inline PyObject* dla_dict_attr(PyObject* d, PyObject* name) {
      PyObject* v = PyDict_GetItemWithError(d, name);
      if (v == NULL) {
        if (PyErr_Occurred()) {
          if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
          PyErr_Clear();
        }
        v = Py_None;
      }
      Py_INCREF(v);
      return v;
    }
    """
    enum:
        DLA_ATTRS_GETATTR
        DLA_ATTRS_NONE
        DLA_ATTRS_DICT
        DLA_ATTRS_MANAGED
    int dla_attr_storage(PyTypeObject* t)
    PyObject* dla_instance_dict(PyObject* obj, int storage, int* inline_values)
    Py_ssize_t dla_shared_key_count(PyTypeObject* t)
    bint dla_shared_keys_lack(PyTypeObject* t, PyObject* a, PyObject* b, PyObject* c)
    object dla_dict_attr(object d, object name)
