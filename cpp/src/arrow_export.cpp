// Export half of the Arrow bridge: TensorView -> ArrowSchema / ArrowArray /
// ArrowDeviceArray and their streams.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "arrow_metadata.hpp"
#include "dlpackarray/arrow_bridge.hpp"
#include "dlpackarray/cuda_exchange.hpp"
#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"
#include "dlpackarray/strided_copy.hpp"
#include "memory_recycling.hpp"

namespace dla {

// One array node's private data.
struct ArrowArrayPrivate {
  ArrowExport* ex = nullptr;
  const void* buffers[2] = {nullptr, nullptr};
  ArrowArray* children[1] = {nullptr};
  // The top level of a CUDA ArrowDeviceArray: its sync_event points here
  // (heap memory, so the struct may be moved), destroyed by the release.
  cuda::CUevent event = nullptr;
};

struct ArrowExport {
  std::atomic<int64_t> refs{1};
  void (*keep_release)(void*) = nullptr;
  void* keep_ctx = nullptr;
  void* block = nullptr;  // aligned_allocate'd copy, or nullptr when sharing the source
  cuda::CUdeviceptr device_block = 0;  // CUDA data's copy on its device, or 0
  DLDevice device{kDLCPU, 0};          // where `values` lives
  int32_t device_methods = 0;
  // CUDA-family data through the device methods: every ArrowDeviceArray gets
  // its own event recorded on `ready_stream` (the view's ready token).
  bool cuda = false;
  void* ready_stream = nullptr;
  // Layout: a chain of fixed-size lists (outermost first) over one leaf.
  int64_t length = 0;
  std::vector<int64_t> list_sizes;
  const char* leaf_format = nullptr;
  bool leaf_bool8 = false;
  bool tensor = false;           // the top level is arrow.fixed_shape_tensor
  std::string top_metadata;      // encoded blob for the top level ("" = none)
  std::string leaf_metadata;     // arrow.bool8 on the leaf
  const void* values = nullptr;  // leaf values buffer (first element)
  // An export hands out one top-level array (a pair, or a stream's one
  // chunk): its private data lives here, one allocation fewer on the hot
  // path.  Its array holds a reference, so the export outlives it.
  ArrowArrayPrivate top_array;
  bool top_array_used = false;
};

namespace {

// The memory of the last finished export, kept for the next: every
// `pa.array(d)` makes one export and its last release ends it, and glibc's
// malloc and free of the record cost more than the rest of its life.  One
// atomic slot, so that an export released on any thread (without the GIL)
// parks its memory and the next export on any thread takes it; when the slot
// is full the memory is freed as before.  The slot holds raw memory, never a
// live record: every export is constructed afresh, so no field can keep a
// previous export's value.  (At exit the parked block is still reachable
// from the slot: not a leak.)  Off under AddressSanitizer (memory_recycling.hpp).
std::atomic<void*> g_spare_export{nullptr};

ArrowExport* new_export() {
  void* mem = g_spare_export.exchange(nullptr, std::memory_order_acquire);
  if (mem == nullptr) mem = ::operator new(sizeof(ArrowExport));
  return new (mem) ArrowExport();
}

void delete_export(ArrowExport* ex) noexcept {
  ex->~ArrowExport();
  void* empty = nullptr;
  if (!kRecycleMemory || !g_spare_export.compare_exchange_strong(
                             empty, ex, std::memory_order_release, std::memory_order_relaxed)) {
    ::operator delete(static_cast<void*>(ex));
  }
}

struct DeleteExport {
  void operator()(ArrowExport* ex) const noexcept { delete_export(ex); }
};

// Size-0 arrays still get a non-NULL values pointer: the spec allows NULL
// there, but not every consumer checks.
alignas(64) const unsigned char kEmpty[64] = {};

int64_t product(const int64_t* v, int32_t n, const char* what) {
  int64_t p = 1;
  for (int32_t i = 0; i < n; ++i) {
    if (__builtin_mul_overflow(p, v[i], &p))
      fail(ErrorKind::Overflow, std::string(what) + " overflows int64");
  }
  return p;
}

// Cell dimensions (1..ndim-1) ordered by decreasing stride: the physical
// order in which a dense permuted tensor stores them.
std::vector<int32_t> physical_order(const TensorView& v) {
  std::vector<int32_t> order;
  for (int32_t i = 1; i < v.ndim; ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    // Length-1 dimensions touch one element whatever their stride: put them
    // outermost, where they never break contiguity.
    const bool a1 = v.shape[a] == 1, b1 = v.shape[b] == 1;
    if (a1 != b1) return a1;
    if (a1) return false;
    return v.strides[a] > v.strides[b];
  });
  return order;
}

TensorView reordered(const TensorView& v, const std::vector<int32_t>& order) {
  TensorView r = v;
  for (size_t k = 0; k < order.size(); ++k) {
    r.shape[k + 1] = v.shape[order[k]];
    r.strides[k + 1] = v.strides[order[k]];
  }
  return r;
}

void pack_bits(const unsigned char* bytes, int64_t n, unsigned char* bits) {
  std::memset(bits, 0, size_t((n + 7) / 8));
  for (int64_t i = 0; i < n; ++i) {
    if (bytes[i]) bits[i >> 3] |= static_cast<unsigned char>(1u << (i & 7));
  }
}

// -- schema nodes ------------------------------------------------------------

// The leaf format and the names are static strings (arrow_format_from_dtype's
// table); only a list level's "+w:N" and metadata (tensors, bool8) are owned
// here, so a plain column's schema is one small allocation and no string
// copy on the export hot path.
struct SchemaPrivate {
  std::string list_format, metadata;
  ArrowSchema* children[1] = {nullptr};
};

void release_schema(ArrowSchema* s) {
  if (s == nullptr || s->release == nullptr) return;
  auto* p = static_cast<SchemaPrivate*>(s->private_data);  // NULL for a plain column
  for (int64_t i = 0; i < s->n_children; ++i) {
    ArrowSchema* c = s->children[i];
    // A consumer may have moved the child out (release == NULL).
    if (c->release != nullptr) c->release(c);
    delete c;
  }
  delete p;  // no-op when NULL
  s->release = nullptr;
}

void build_schema(const ArrowExport& ex, size_t level, ArrowSchema* out) {
  out->release = nullptr;
  const bool leaf = level == ex.list_sizes.size();
  if (leaf && ex.leaf_metadata.empty() && (level != 0 || ex.top_metadata.empty())) {
    // A plain column: static strings only, nothing to own or free.
    *out = ArrowSchema{};
    out->format = ex.leaf_format;
    out->name = level == 0 ? "" : "item";
    out->flags = ARROW_FLAG_NULLABLE;
    out->release = release_schema;
    return;
  }
  auto* p = new SchemaPrivate();
  const char* format = ex.leaf_format;
  if (leaf) {
    p->metadata = ex.leaf_metadata;
  } else {
    p->list_format = "+w:" + std::to_string(ex.list_sizes[level]);
    format = p->list_format.c_str();
  }
  if (level == 0 && !ex.top_metadata.empty()) p->metadata = ex.top_metadata;
  if (!leaf) {
    auto* child = new (std::nothrow) ArrowSchema();
    if (child == nullptr) {
      delete p;
      throw std::bad_alloc();
    }
    try {
      build_schema(ex, level + 1, child);
    } catch (...) {
      delete child;
      delete p;
      throw;
    }
    p->children[0] = child;
  }
  out->format = format;
  out->name = level == 0 ? "" : "item";
  out->metadata = p->metadata.empty() ? nullptr : p->metadata.data();
  out->flags = ARROW_FLAG_NULLABLE;
  out->n_children = leaf ? 0 : 1;
  out->children = leaf ? nullptr : p->children;
  out->dictionary = nullptr;
  out->private_data = p;
  out->release = release_schema;
}

// -- array nodes -------------------------------------------------------------

void release_array(ArrowArray* a) {
  if (a == nullptr || a->release == nullptr) return;
  auto* p = static_cast<ArrowArrayPrivate*>(a->private_data);
  for (int64_t i = 0; i < a->n_children; ++i) {
    ArrowArray* c = a->children[i];
    if (c->release != nullptr) c->release(c);
    delete c;
  }
  ArrowExport* ex = p->ex;
  // No Python and no throw: releases run on any thread, without the GIL.
  cuda::destroy_event(ex->device.device_id, p->event);
  if (p == &ex->top_array) {
    p->event = nullptr;
  } else {
    delete p;
  }
  a->release = nullptr;
  // Last: this may run the keepalive's release (and take the GIL).
  arrow_export_unref(ex);
}

void build_array(ArrowExport& ex, size_t level, int64_t length, ArrowArray* out) {
  out->release = nullptr;
  ArrowArrayPrivate* p;
  if (level == 0 && !ex.top_array_used) {
    p = &ex.top_array;
    *p = ArrowArrayPrivate();
    ex.top_array_used = true;
  } else {
    p = new ArrowArrayPrivate();
  }
  // Frees p on a failure below (never the export's own slot).
  auto drop = [&] {
    if (p == &ex.top_array) {
      ex.top_array_used = false;
    } else {
      delete p;
    }
  };
  const bool leaf = level == ex.list_sizes.size();
  if (!leaf) {
    auto* child = new (std::nothrow) ArrowArray();
    if (child == nullptr) {
      drop();
      throw std::bad_alloc();
    }
    try {
      build_array(ex, level + 1, length * ex.list_sizes[level], child);
    } catch (...) {
      delete child;
      drop();
      throw;
    }
    p->children[0] = child;
  } else {
    p->buffers[1] = ex.values;
  }
  ex.refs.fetch_add(1, std::memory_order_relaxed);
  p->ex = &ex;
  out->length = length;
  out->null_count = 0;
  out->offset = 0;
  out->n_buffers = leaf ? 2 : 1;
  out->n_children = leaf ? 0 : 1;
  out->buffers = p->buffers;
  out->children = leaf ? nullptr : p->children;
  out->dictionary = nullptr;
  out->private_data = p;
  out->release = release_array;
}

// -- streams -------------------------------------------------------------------

struct StreamPrivate {
  ArrowExport* ex = nullptr;
  bool done = false;
  std::string error;
};

// Stream callbacks report errors through their return code and
// get_last_error, never by throwing into C.  noexcept is safe here (unlike in
// the releases): building structs never calls into Python, so CPython cannot
// end the thread inside with a forced unwind that catch (...) would swallow.
template <class Fn>
int guarded(StreamPrivate* p, Fn&& fn) noexcept {
  try {
    fn();
    return 0;
  } catch (const std::bad_alloc&) {
    p->error = "out of memory";
    return ENOMEM;
  } catch (const std::exception& e) {
    p->error = e.what();
    return EINVAL;
  } catch (...) {
    p->error = "unknown error";
    return EIO;
  }
}

// The callbacks both stream kinds share (ArrowArrayStream and
// ArrowDeviceArrayStream differ only in what get_next fills).
template <class Stream>
int stream_get_schema(Stream* s, ArrowSchema* out) {
  auto* p = static_cast<StreamPrivate*>(s->private_data);
  return guarded(p, [&] { arrow_export_schema(p->ex, out); });
}

template <class Stream>
const char* stream_last_error(Stream* s) {
  auto* p = static_cast<StreamPrivate*>(s->private_data);
  return p->error.empty() ? nullptr : p->error.c_str();
}

template <class Stream>
void stream_release(Stream* s) {
  if (s == nullptr || s->release == nullptr) return;
  auto* p = static_cast<StreamPrivate*>(s->private_data);
  ArrowExport* ex = p->ex;
  delete p;
  s->release = nullptr;
  arrow_export_unref(ex);
}

int stream_get_next(ArrowArrayStream* s, ArrowArray* out) {
  auto* p = static_cast<StreamPrivate*>(s->private_data);
  return guarded(p, [&] {
    out->release = nullptr;  // end of stream unless an array follows
    if (p->done) return;
    arrow_export_array(p->ex, out);
    p->done = true;
  });
}

int device_stream_get_next(ArrowDeviceArrayStream* s, ArrowDeviceArray* out) {
  auto* p = static_cast<StreamPrivate*>(s->private_data);
  return guarded(p, [&] {
    out->array.release = nullptr;
    if (p->done) return;
    arrow_export_device_array(p->ex, out);
    p->done = true;
  });
}

// Arrow's fixed-size list_size is an int32 (format "+w:N"): checked before any
// struct or copy is made.  (The child lengths, length * list sizes, are
// prefix products of the shape, which validate() bounds by int64.)
void check_list_sizes(const ArrowExport& ex, const TensorView& v) {
  for (const int64_t size : ex.list_sizes) {
    if (size > INT32_MAX) {
      std::string shape;
      for (int32_t i = 0; i < v.ndim; ++i) shape += (i ? ", " : "") + std::to_string(v.shape[i]);
      fail(ErrorKind::Value,
           "cannot export a tensor of shape (" + shape +
               ") to Arrow: " + (ex.tensor ? "each row holds " : "a fixed-size list level holds ") +
               std::to_string(size) +
               " elements, and Arrow fixed-size lists hold at most 2**31 - 1 (their list_size "
               "is an int32); reshape it so that no row (or nested level) is that large");
    }
  }
}

// The arrow.bool8 leaf metadata, encoded once.
const std::string& bool8_metadata() {
  static const std::string blob = arrow_meta::encode(
      {{arrow_meta::kExtensionName, arrow_meta::kBool8}, {arrow_meta::kExtensionMetadata, ""}});
  return blob;
}

// The arrow.fixed_shape_tensor metadata of v's cells stored in `order`
// (dimensions 1..ndim-1, outermost first).  A tensor is exported again and
// again with one cell layout, and the JSON and its encoding were ~2,500
// instructions of every export: each thread remembers its last layout's blob,
// and every export copies it (its schemas outlive any later layout).  Per
// thread, so no lock.  (A plain copy, not a shared pointer: libstdc++'s
// shared_ptr binds __libc_single_threaded, glibc 2.32, beyond manylinux_2_28.)
const std::string& tensor_metadata(const TensorView& v, const std::vector<int32_t>& order) {
  struct Memo {
    std::vector<int64_t> shape, perm;
    std::string blob;
  };
  thread_local Memo memo;
  const size_t cells = order.size();
  int64_t shape[kMaxNdim], perm[kMaxNdim];
  for (size_t k = 0; k < cells; ++k) {
    shape[k] = v.shape[order[k]];
    perm[size_t(order[k] - 1)] = int64_t(k);
  }
  if (!memo.blob.empty() && memo.shape.size() == cells &&
      std::equal(shape, shape + cells, memo.shape.begin()) &&
      std::equal(perm, perm + cells, memo.perm.begin())) {
    return memo.blob;
  }
  std::vector<int64_t> new_shape(shape, shape + cells), new_perm(perm, perm + cells);
  std::string blob = arrow_meta::encode(
      {{arrow_meta::kExtensionName, arrow_meta::kFixedShapeTensor},
       {arrow_meta::kExtensionMetadata, arrow_meta::tensor_json(new_shape, new_perm)}});
  // Committed only once everything is made: a throw leaves the memo as it was.
  memo.shape.swap(new_shape);
  memo.perm.swap(new_perm);
  memo.blob.swap(blob);
  return memo.blob;
}

// Where the Arrow C data interface states what a valid ArrowSchema is.
constexpr const char* kSchemaStructureSpec =
    "https://arrow.apache.org/docs/format/CDataInterface.html#the-arrowschema-structure";

std::string no_arrow_type(DLDataType dt) {
  return "dtype " + dtype_name(dt) +
         " has no Arrow equivalent: Arrow carries bool, int8-64, uint8-64 and float16/32/64 "
         "(view the data as an integer type of the same width to export its bits)";
}

}  // namespace

void arrow_apply_request(const ArrowSchema& requested, const TensorView& v,
                         ArrowExportOptions* opts) {
  // The import's parse is the one validator of a schema from outside: every
  // node is checked (alive, a UTF-8 format, children that agree with their
  // count, no NULL child, list sizes, nesting depth, extension metadata)
  // before its format, children or metadata are read.  Its TypeErrors name a
  // type that dlpackarray neither reads nor produces (strings, dictionaries,
  // other extensions), and a request is best effort (PyCapsule interface,
  // "Schema Requests"): those are answered with the export's own type.
  // Anything else it refuses is a malformed schema, raised naming the request.
  ArrowTypeInfo t;
  try {
    arrow_parse_schema(requested, &t);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Type) {
      fail(e.kind(), std::string("requested_schema is not a valid ArrowSchema (") +
                         kSchemaStructureSpec + "): " + e.what());
    }
    // A TypeError comes only after the top node passed its checks: its
    // format is a live UTF-8 string.  A struct is another number of
    // columns, not another representation of this one.
    if (std::strcmp(requested.format, "+s") == 0) {
      fail(ErrorKind::Value,
           "the requested schema is a struct (a record batch or table); a DLPackArray exports "
           "one column");
    }
    return;
  }
  if (t.tensor) {
    opts->requested_tensor = true;
  } else if (t.n_sizes > 0) {
    if (v.ndim >= 2 && t.n_sizes != v.ndim - 1) {
      fail(ErrorKind::Value, "the requested schema nests " + std::to_string(t.n_sizes) +
                                 " fixed-size list level(s) but the tensor has " +
                                 std::to_string(v.ndim) + " dimensions (" +
                                 std::to_string(v.ndim - 1) + " level(s) needed)");
    }
    opts->nested_lists = v.ndim >= 2;
  }
  if (t.bit_packed && v.dtype.code == kDLBool) opts->bit_packed_bool = true;
}

ArrowExport* arrow_export_new(const TensorView& v, const ArrowExportOptions& opts) {
  // `v` is a DLPackArray's view, validated (dtype, shape, strides, address
  // range, overflow-checked) when the array was made, and never changed
  // since: __dlpack__ hands it out as it is, and a zero-copy export only
  // repeats its pointer and shape.  A copy reads memory by the view's extent,
  // so that path validates again (arrow_bridge.hpp states the precondition).
  // CUDA-family data through the device methods stays on its device: any
  // copy is made there, and consumers get a sync event.  The CPU methods
  // need memory the host can read (pinned and managed memory can).
  // (Host data, the common case, skips both device lookups.)
  const bool on_host = v.device.device_type == kDLCPU;
  const bool on_cuda = !on_host && opts.device == 1 && cuda::is_cuda_family(v.device);
  if (!opts.schema_only && !on_host && !on_cuda && !device_is_host_accessible(v.device)) {
    const std::string where = "device (" + std::to_string(int(v.device.device_type)) + ", " +
                              std::to_string(v.device.device_id) + ")";
    if (opts.device == 0) {
      fail(ErrorKind::Buffer,
           "data on " + where +
               " is not host memory, so the CPU Arrow methods cannot export it; device data "
               "is offered through __arrow_c_device_array__ and __arrow_c_device_stream__");
    }
    fail(ErrorKind::Buffer, "cannot export data on " + where +
                                " through Arrow: dlpackarray exports host memory and CUDA "
                                "memory (device types 2, 3 and 13), whose sync events it makes; "
                                "other devices' events are not supported");
  }
  const bool is_bool = v.dtype.code == kDLBool && v.dtype.bits == 8 && v.dtype.lanes == 1;
  const char* fmt = is_bool ? arrow_format_from_dtype(DLDataType{kDLInt, 8, 1})
                            : arrow_format_from_dtype(v.dtype);
  if (fmt == nullptr) fail(ErrorKind::Type, no_arrow_type(v.dtype));

  std::unique_ptr<ArrowExport, DeleteExport> ex(new_export());
  ex->device = v.device;
  ex->device_methods = opts.device;
  // Packing bits is a host loop: for data on a CUDA device the request is
  // answered with arrow.bool8 (requests are best effort).
  const bool bits = is_bool && opts.bit_packed_bool && !on_cuda;
  ex->leaf_format = bits ? "b" : fmt;
  if (is_bool && !bits) ex->leaf_metadata = bool8_metadata();

  // Layout and whether the memory can be shared as it is.
  bool dense = true;
  std::vector<int32_t> order;  // tensor cells: physical order of dimensions 1..ndim-1
  if (v.ndim == 0) {
    ex->length = 1;
  } else {
    ex->length = v.shape[0];
    if (v.ndim == 1) {
      // is_c_contiguous() of one dimension, the hot path, without the call:
      // no element or one element (any stride), or a unit stride.
      dense = v.shape[0] <= 1 || v.strides[0] == 1;
    } else if (opts.nested_lists) {
      for (int32_t i = 1; i < v.ndim; ++i) ex->list_sizes.push_back(v.shape[i]);
      dense = is_c_contiguous(v);
    } else {
      ex->tensor = true;
      ex->list_sizes.push_back(product(v.shape + 1, v.ndim - 1, "tensor cell size"));
      if (!is_c_contiguous(v)) {
        // A dense tensor whose cell dimensions are permuted can go out
        // zero-copy: fixed_shape_tensor's permutation names the order.  But
        // consumers that read the storage (DuckDB, polars, nanoarrow) ignore
        // the permutation and would see the cells in memory order: unless the
        // consumer asked for the extension type itself, or copy=False forbids
        // the copy, the cells go out in logical order, copied (docs/arrow.md).
        order = physical_order(v);
        dense = is_c_contiguous(reordered(v, order)) && (opts.copy == 0 || opts.requested_tensor);
      }
    }
  }
  check_list_sizes(*ex, v);
  if (!dense && opts.copy == 0) {
    fail(ErrorKind::Buffer,
         "exporting this tensor to Arrow needs a copy (its strides have gaps, are negative or "
         "zero, or do not keep rows outermost) and copy=False was given");
  }
  if (bits && opts.copy == 0) {
    fail(ErrorKind::Buffer,
         "bit-packed Arrow booleans (format 'b') need a packing copy and copy=False was given; "
         "the arrow.bool8 layout is zero-copy");
  }
  const bool must_copy = !dense || bits || opts.copy == 1;
  if (ex->tensor) {
    // A copy is C-ordered: the identity permutation.
    if (must_copy || order.empty()) {
      order.clear();
      for (int32_t i = 1; i < v.ndim; ++i) order.push_back(i);
    }
    ex->top_metadata = tensor_metadata(v, order);
  }
  if (opts.schema_only) return ex.release();

  ex->cuda = on_cuda;
  ex->ready_stream = v.ready_stream;
  if (!must_copy) {
    ex->values = v.data == nullptr ? nullptr : static_cast<const char*>(v.data) + v.byte_offset;
  } else if (on_cuda) {
    // A dense copy on the data's device (never through the host: producing
    // device structs must not copy across devices), enqueued on the ready
    // stream, where the sync event is recorded after it.  cuMemAlloc memory
    // is device memory whatever the source was (pinned, managed).
    ex->device_block = cuda::copy_on_device(v);
    ex->values = reinterpret_cast<const void*>(static_cast<uintptr_t>(ex->device_block));
    ex->device = DLDevice{kDLCUDA, v.device.device_id};
  } else {
    const Extent extent = validate(v);
    const int64_t itemsize = dtype_itemsize(v.dtype);
    int64_t nbytes;
    if (__builtin_mul_overflow(extent.size, itemsize, &nbytes)) {
      fail(ErrorKind::Overflow, "array size in bytes overflows int64");
    }
    void* dense_copy = aligned_allocate(nbytes);
    try {
      strided_copy_to_contiguous(v, dense_copy);
    } catch (...) {
      aligned_free(dense_copy);
      throw;
    }
    if (bits) {
      void* packed = nullptr;
      try {
        packed = aligned_allocate((extent.size + 7) / 8);
      } catch (...) {
        aligned_free(dense_copy);
        throw;
      }
      pack_bits(static_cast<const unsigned char*>(dense_copy), extent.size,
                static_cast<unsigned char*>(packed));
      aligned_free(dense_copy);
      dense_copy = packed;
    }
    ex->block = dense_copy;
    ex->values = dense_copy;
  }
  // Device memory never gets the host's placeholder.
  if (ex->values == nullptr && !on_cuda) ex->values = kEmpty;
  return ex.release();
}

bool arrow_export_shares_memory(const ArrowExport* ex) noexcept {
  return ex->block == nullptr && ex->device_block == 0;
}

void arrow_export_set_keepalive(ArrowExport* ex, void (*release)(void*), void* ctx) noexcept {
  ex->keep_release = release;
  ex->keep_ctx = ctx;
}

// Not noexcept, nor is any release callback above it: see arrow_bridge.hpp.
void arrow_export_unref(ArrowExport* ex) {
  if (ex == nullptr || ex->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (ex->block != nullptr) aligned_free(ex->block);
  if (ex->device_block != 0) cuda::free_device(ex->device.device_id, ex->device_block);
  void (*release)(void*) = ex->keep_release;
  void* ctx = ex->keep_ctx;
  delete_export(ex);
  if (release != nullptr) release(ctx);
}

void arrow_export_schema(ArrowExport* ex, ArrowSchema* out) { build_schema(*ex, 0, out); }

void arrow_export_array(ArrowExport* ex, ArrowArray* out) { build_array(*ex, 0, ex->length, out); }

void arrow_export_device_array(ArrowExport* ex, ArrowDeviceArray* out) {
  out->array.release = nullptr;
  // CUDA data: an event recorded now on the ready stream, after the work (or
  // the copy) that produces the data; one per struct, since each struct is
  // released on its own.  Host memory needs no synchronisation: NULL.
  cuda::CUevent event =
      ex->cuda ? cuda::record_ready_event(ex->device.device_id, ex->ready_stream) : nullptr;
  try {
    build_array(*ex, 0, ex->length, &out->array);
  } catch (...) {
    cuda::destroy_event(ex->device.device_id, event);
    throw;
  }
  auto* p = static_cast<ArrowArrayPrivate*>(out->array.private_data);
  p->event = event;
  // Arrow's CPU device has no id (-1); DLPack says 0.
  out->device_type = ArrowDeviceType(ex->device.device_type);
  out->device_id = ex->device.device_type == kDLCPU ? -1 : ex->device.device_id;
  // The spec's cudaEvent_t*: a pointer to the handle, not the handle.
  out->sync_event = event == nullptr ? nullptr : static_cast<void*>(&p->event);
  out->reserved[0] = out->reserved[1] = out->reserved[2] = 0;
}

void arrow_export_stream(ArrowExport* ex, ArrowArrayStream* out) {
  out->release = nullptr;
  auto* p = new StreamPrivate();
  ex->refs.fetch_add(1, std::memory_order_relaxed);
  p->ex = ex;
  out->get_schema = stream_get_schema<ArrowArrayStream>;
  out->get_next = stream_get_next;
  out->get_last_error = stream_last_error<ArrowArrayStream>;
  out->private_data = p;
  out->release = stream_release<ArrowArrayStream>;
}

void arrow_export_device_stream(ArrowExport* ex, ArrowDeviceArrayStream* out) {
  out->release = nullptr;
  auto* p = new StreamPrivate();
  ex->refs.fetch_add(1, std::memory_order_relaxed);
  p->ex = ex;
  out->device_type = ArrowDeviceType(ex->device.device_type);
  out->get_schema = stream_get_schema<ArrowDeviceArrayStream>;
  out->get_next = device_stream_get_next;
  out->get_last_error = stream_last_error<ArrowDeviceArrayStream>;
  out->private_data = p;
  out->release = stream_release<ArrowDeviceArrayStream>;
}

}  // namespace dla
