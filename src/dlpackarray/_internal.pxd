# cython: language_level=3
# The one internal boundary between the package's Cython modules: a module
# cimports what it uses of another module from here, and from nowhere else
# (tests/capi/test_module_boundary.py enforces it).  Each name stays declared in the
# .pxd of the module that implements it (Cython exports a cdef function or
# class only from its own module, and calls it directly through the pointer
# imported at module load: no extra indirection); this file lists, per owner,
# what the other modules may use.  A name not listed here is private to its
# module.  Not shipped in the wheel (pyproject.toml wheel.exclude).

# CUDA: every driver call of the package.
from dlpackarray._cuda cimport (
    DeviceOwner, adopt_consumer_stream, copy_device_to_host_into, copy_host_bytes_to_device,
    copy_on_device_into, export_cuda_array_interface, is_cuda_device, is_cuda_stream_device,
    order_for_consumer, producer_stream_argument, ready_after_bare_capsule, ready_after_request,
    synchronize_for_host_read, view_from_cuda_array_interface, wait_arrow_sync_event,
)
# Argument parsing, heap copies and Python helpers shared by every protocol.
from dlpackarray._common cimport (
    DType, HeapOwner, _PyType_Lookup, copy_to_bytes, copy_to_heap, device_tuple, dtype_object,
    parse_copy, parse_device, parse_dtype, require_memory, type_has,
)
# View arithmetic (index, reshape, permute, reinterpret).
from dlpackarray._views cimport (
    as_int64, index_into, permute_into, reinterpret_into, reshape_into,
)
# The protocols, each import (view_from_*) and export.
from dlpackarray._buffer cimport BufferOwner, acquire_buffer, fill_buffer, view_from_buffer
from dlpackarray._dlpack cimport (
    export_capsule, is_versioned_request, release_adopted, request_capsule, request_common,
    takes_max_version, view_from_capsule,
)
from dlpackarray._exchange cimport (
    exchange_api_of, own_exchange_api, view_from_exchange, view_from_managed_legacy,
    view_from_managed_versioned,
)
from dlpackarray._array_interface cimport (
    call_array_method, export_array_interface, export_array_struct, export_numpy,
    view_from_array_interface, view_from_array_struct_capsule, view_from_extension_dtype,
    view_from_extension_interface, view_from_typed_buffer,
)
# (The Arrow C data and stream interfaces' structs: _crafted's test producers fill them.)
from dlpackarray._arrow cimport (
    ArrowArray, ArrowArrayStream, ArrowSchema, arrow_methods, arrow_path_first, export_arrow,
    export_arrow_schema, raise_arrow_data_error, view_from_arrow,
)
from dlpackarray._scalars cimport (
    contains_of, index_of, item_of, scalar_of, tolist_of, truth_of,
)
# The import precedence, the one entry of every constructor.
from dlpackarray._import cimport fill
# The array type, for the C-level entry points (_capi, _fast_entries, _pickle).
from dlpackarray._array cimport (
    DLPackArray, check_ready, kFailed, kInitialising, mark_ready, new_from_object, wrap_view,
)
