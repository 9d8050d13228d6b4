// DLPack <-> Arrow C data interface bridge: builds Arrow schemas, arrays and
// streams that describe a TensorView (export), and reads Arrow arrays back
// into TensorViews (import).  No Python here: whatever keeps exported memory
// alive is an opaque ArrowKeepalive whose release the last Arrow struct calls,
// from whichever thread releases it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dlpackarray/arrow_abi.hpp"
#include "dlpackarray/dlpack_abi.hpp"
#include "dlpackarray/tensor_view.hpp"

namespace dla {

// -- export ---------------------------------------------------------------------

// Layout choices a requested schema (or the defaults) select.
struct ArrowExportOptions {
  bool bit_packed_bool = false;   // bool as Arrow "b" (a packing copy) instead of arrow.bool8
  bool nested_lists = false;      // N-D as nested fixed-size lists instead of fixed_shape_tensor
  bool requested_tensor = false;  // the consumer asked for arrow.fixed_shape_tensor itself
  int32_t copy = -1;              // -1: copy only when needed, 0: never copy, 1: always copy
  int32_t device = 0;             // 0: CPU methods, 1: device methods
  bool schema_only = false;       // plan the type only: never copy
};

// Reads a consumer's requested schema (best effort, as the PyCapsule
// interface asks): a "b" leaf selects bit-packed bools, fixed-size lists
// without the tensor extension select nested lists, the tensor extension
// lets permuted cells go out zero-copy; anything else keeps the defaults.
// The request is validated by the import's schema parse, node by node before
// anything is read through it: a malformed schema raises (ValueError, or
// OverflowError for sizes beyond int64) naming the request; a type
// dlpackarray does not handle is answered with the export's own type.  A
// struct, or a request with a different number of dimensions (nesting
// depth) than the tensor can be given, raises ValueError.
void arrow_apply_request(const ArrowSchema& requested, const TensorView& v,
                         ArrowExportOptions* opts);

// The shared state of one export: layout, data (the source's or a copy made
// once, here) and the keepalive.  Reference counted: every Arrow struct built
// from it holds a reference, so the structs may be released in any order, on
// any thread, and children may be moved out and released on their own.
struct ArrowExport;

// Plans the export of `v`, a validated view (validate(): a DLPackArray's view
// is validated when the array is made; only the copy path validates again):
// checks dtype and device, decides the layout and
// copies when it must (or throws BufferError when opts.copy == 0).  Returns a
// new export holding one reference.  Throws TypeError naming dtypes Arrow
// cannot carry.  CUDA-family data through the device methods (opts.device)
// is copied on its device (cuda::copy_on_device, freed with the export) and
// its ArrowDeviceArrays carry sync events; the CPU methods need memory the
// host can read, and the caller makes pinned/managed memory ready first.
ArrowExport* arrow_export_new(const TensorView& v, const ArrowExportOptions& opts);

// Whether the export still reads the source memory (false after a copy), and
// then the keepalive whose release(ctx) runs once, when the last reference
// goes.  Call before building any struct.  Unref, and every release callback
// that ends in it, is not noexcept: the keepalive's release may take the GIL
// (python_shim.hpp says why a thread ended there must be able to unwind).
bool arrow_export_shares_memory(const ArrowExport* ex) noexcept;
void arrow_export_set_keepalive(ArrowExport* ex, void (*release)(void*), void* ctx) noexcept;
void arrow_export_unref(ArrowExport* ex);

// Fill caller-provided structs (whose release is NULL); each takes its own
// reference.  On failure they throw and leave `out->release` NULL.
void arrow_export_schema(ArrowExport* ex, ArrowSchema* out);
void arrow_export_array(ArrowExport* ex, ArrowArray* out);
void arrow_export_device_array(ArrowExport* ex, ArrowDeviceArray* out);
void arrow_export_stream(ArrowExport* ex, ArrowArrayStream* out);
void arrow_export_device_stream(ArrowExport* ex, ArrowDeviceArrayStream* out);

// -- import ---------------------------------------------------------------------

// What a schema says about the tensor it carries.  Fixed-size arrays: it is
// filled on every Arrow import, which should allocate nothing.
struct ArrowTypeInfo {
  DLDataType dtype{kDLUInt, 8, 1};
  bool bit_packed = false;         // Arrow "b": bits that need unpacking (a copy)
  bool bool8 = false;              // the leaf is the arrow.bool8 extension
  bool tensor = false;             // arrow.fixed_shape_tensor (cell = its logical shape)
  int32_t n_sizes = 0;             // fixed-size-list levels
  int32_t cell_ndim = 0;           // dimensions of one row (after the first dimension)
  int64_t sizes[kMaxNdim];         // list_size of each fixed-size-list level, outermost first
  int64_t cell[kMaxNdim];          // logical shape of one row
  int64_t cell_strides[kMaxNdim];  // element strides of `cell` in the row's dense storage
  int64_t tensor_shape[kMaxNdim];  // arrow.fixed_shape_tensor's physical (stored) shape
};

// The Arrow type, as error messages name it, e.g.
// "arrow.fixed_shape_tensor<float32>[2,3]" or "int64[4]" (fixed-size lists).
std::string arrow_describe(const ArrowTypeInfo& t);

// Parses a schema: a primitive, nested fixed-size lists of one, the
// arrow.fixed_shape_tensor or arrow.bool8 extension.  Throws TypeError naming
// the Arrow type for everything else (strings, dictionaries, structs, ...).
// Remembers the calling thread's last success by the schema's content, which
// a type's every export repeats (cpp/src/arrow_schema_memo.cpp).
void arrow_parse_schema(const ArrowSchema& s, ArrowTypeInfo* out);

// One array of a parsed type as a view.
struct ArrowBinding {
  TensorView view;         // data = the values buffer; for bit-packed bools, the bitmap
  int64_t bit_offset = 0;  // bit-packed bools: index of the first bit in view.data
  bool bit_packed = false;
};

// Binds an array of type `t` on device `dev`: checks buffer counts, lengths,
// offsets (its own and every child's) and nulls (ValueError naming the null
// count), and fills `out` for rows [offset, offset + length).  On a CUDA
// device the data must be ready (its sync event waited on): a validity
// bitmap is read through a small device-to-host copy.
void arrow_bind_array(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev, ArrowBinding* out);

// The same into a view of the caller's (an import's own descriptor, with no
// copy of it): bit-packed booleans (t.bit_packed) set *bit_offset.  On an
// exception `view` holds no valid description.
void arrow_bind_view(const ArrowTypeInfo& t, const ArrowArray& a, DLDevice dev, TensorView* view,
                     int64_t* bit_offset);

// The concatenation of `chunks` (rows stacked; every chunk of type `t`) as a
// dense C-ordered view on `dev` with data = nullptr, and its size in bytes.
int64_t arrow_concat_layout(const ArrowTypeInfo& t, const std::vector<ArrowBinding>& chunks,
                            DLDevice dev, TensorView* out);

// Writes every chunk, one after the other, to `dst` (arrow_concat_layout's
// size); host memory only.
void arrow_concat(const std::vector<ArrowBinding>& chunks, void* dst);

// Writes the bound elements in C order, dense, to `dst` (size * itemsize
// bytes): unpacks bit-packed bools, undoes strides and permutations.
void arrow_materialize(const ArrowBinding& b, void* dst);

}  // namespace dla
