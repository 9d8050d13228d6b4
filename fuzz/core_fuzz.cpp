// libFuzzer harness over the C++ core: DLTensor import and validation, the
// view arithmetic (index/reshape/permute/dtype), the strided copy, the
// array-struct import, the managed-tensor builders and the dtype parsers.
// Built with clang -fsanitize=fuzzer,address,undefined (fuzz/build.sh), so
// any out-of-bounds access, overflow or shift UB is a crash.
//
// Oracle beyond the sanitizers: the backing memory is one heap block of
// exactly `len` bytes.  A view that validate_within() accepts must only touch
// bytes inside it, and so must every view derived from it; the harness copies
// them all with strided_copy_to_contiguous (ASan sees any stray byte) and
// aborts if a derived view's extent leaves the parent's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlpackarray/array_interface.hpp"
#include "dlpackarray/dtype.hpp"
#include "dlpackarray/errors.hpp"
#include "dlpackarray/managed_tensor.hpp"
#include "dlpackarray/strided_copy.hpp"
#include "dlpackarray/tensor_view.hpp"
#include "dlpackarray/view_ops.hpp"

namespace {

// Reads fixed-size values from the input, zero once exhausted.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  template <typename T>
  T take() {
    T value{};
    size_t k = n_ < sizeof(T) ? n_ : sizeof(T);
    std::memcpy(&value, p_, k);
    p_ += k;
    n_ -= k;
    return value;
  }
  // Small values most of the time, the full range sometimes: interesting
  // extents are near 0 and near the int64 limits.
  int64_t extent() {
    uint8_t sel = take<uint8_t>();
    if (sel < 200) return static_cast<int64_t>(sel % 9) - 2;
    if (sel < 230) return take<int8_t>();
    if (sel < 243) return edge(take<uint8_t>());
    return take<int64_t>();
  }
  // The values where int64 arithmetic breaks (negating INT64_MIN, doubling
  // 2**62), which 8 random bytes almost never hit.
  static int64_t edge(uint8_t k) {
    static constexpr int64_t kEdges[] = {
        INT64_MIN,         INT64_MIN + 1,       INT64_MAX,          INT64_MAX - 1,
        int64_t(1) << 62,  -(int64_t(1) << 62), int64_t(1) << 61,   -(int64_t(1) << 61),
        int64_t(1) << 32,  -(int64_t(1) << 32), (int64_t(1) << 31), -(int64_t(1) << 31),
        INT64_MAX / 2 + 1, INT64_MIN / 2 - 1,   INT64_MAX / 3 + 1,  INT64_MIN / 3 - 1,
    };
    return kEdges[k % (sizeof(kEdges) / sizeof(kEdges[0]))];
  }
  std::string text(size_t max) {
    size_t k = take<uint8_t>() % (max + 1);
    if (k > n_) k = n_;
    std::string s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return s;
  }
  bool empty() const { return n_ == 0; }

 private:
  const uint8_t* p_;
  size_t n_;
};

constexpr int64_t kMaxCopyBytes = 1 << 20;

void copy_if_small(const dla::TensorView& v) {
  int64_t nbytes = 0;
  try {
    nbytes = dla::view_nbytes(v);
  } catch (const dla::Error&) {
    return;
  }
  if (nbytes > kMaxCopyBytes) return;
  void* dst = dla::aligned_allocate(nbytes);
  dla::strided_copy_to_contiguous(v, dst);
  dla::aligned_free(dst);
}

// A derived view must stay inside the parent's memory: same data pointer,
// validated within the same block.
void check_derived(const dla::TensorView& out, const void* base, int64_t len) {
  dla::validate_within(out, base, len);  // throwing here is a harness failure
  copy_if_small(out);
  (void)dla::is_c_contiguous(out);
  (void)dla::is_f_contiguous(out);
  for (int32_t i = 0; i < out.ndim; ++i) (void)dla::byte_stride(out, i);
}

template <typename F>
void derived(F&& make, const void* base, int64_t len) {
  dla::TensorView out;
  try {
    make(&out);
  } catch (const dla::Error&) {
    return;  // refusing a request is always allowed
  }
  try {
    check_derived(out, base, len);
  } catch (const dla::Error&) {
    // A view operation produced something outside its parent: a real bug.
    __builtin_trap();
  }
}

void fuzz_views(Reader& r, const dla::TensorView& v, const void* base, int64_t len) {
  // Basic indexing.
  {
    int32_t n = r.take<uint8_t>() % 6;
    dla::IndexItem items[6];
    for (int32_t i = 0; i < n; ++i) {
      items[i].kind = r.take<uint8_t>() % 4;
      items[i].start = r.extent();
      items[i].stop = r.extent();
      items[i].step = r.extent();
      uint8_t sentinel = r.take<uint8_t>();
      if (sentinel & 1) items[i].start = INT64_MIN;
      if (sentinel & 2) items[i].stop = INT64_MAX;
      if (sentinel & 4) items[i].start = INT64_MAX;
      if (sentinel & 8) items[i].stop = INT64_MIN;
      if (items[i].kind == dla::IndexItem::kSlice && items[i].step == 0) items[i].step = 1;
    }
    derived([&](dla::TensorView* out) { dla::index_view(v, items, n, out); }, base, len);
  }
  // Reshape.
  {
    int32_t n = r.take<uint8_t>() % 6;
    int64_t shape[6];
    for (int32_t i = 0; i < n; ++i) shape[i] = r.extent();
    derived([&](dla::TensorView* out) { dla::reshape_view(v, shape, n, out); }, base, len);
  }
  // Permutation.
  {
    int32_t n = r.take<uint8_t>() % 6;
    int64_t axes[6];
    for (int32_t i = 0; i < n; ++i) axes[i] = r.extent();
    derived([&](dla::TensorView* out) { dla::permute_view(v, axes, n, out); }, base, len);
  }
  // dtype reinterpretation.
  {
    dla::DLDataType dt{r.take<uint8_t>(), r.take<uint8_t>(), r.take<uint16_t>()};
    derived([&](dla::TensorView* out) { dla::dtype_view(v, dt, out); }, base, len);
  }
}

void fuzz_dltensor(Reader& r) {
  // Backing memory of an exact size: ASan flags one byte beyond it.
  int64_t len = r.take<uint8_t>();
  std::vector<uint8_t> block(static_cast<size_t>(len) + 1);
  uint8_t* base = block.data();

  int32_t ndim = static_cast<int32_t>(r.take<uint8_t>() % 8);
  if (r.take<uint8_t>() == 255) ndim = r.take<int32_t>();
  int32_t stored = ndim > 0 && ndim <= 64 ? ndim : 0;
  std::vector<int64_t> shape(stored + 1), strides(stored + 1);
  for (int32_t i = 0; i < stored; ++i) shape[i] = r.extent();
  for (int32_t i = 0; i < stored; ++i) strides[i] = r.extent();
  uint8_t which = r.take<uint8_t>();
  dla::DLTensor t{};
  t.data = base + r.take<uint8_t>() % (len + 1);
  // Any address at all: validate() must judge wrap-around without touching
  // it (validate_within() below then refuses it).
  if (which & 32) t.data = reinterpret_cast<void*>(r.take<uintptr_t>());
  t.device = {dla::kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = {r.take<uint8_t>(), r.take<uint8_t>(), r.take<uint16_t>()};
  if (which & 1) t.dtype = {dla::kDLFloat, static_cast<uint8_t>(8 << (which >> 6)), 1};
  t.shape = (which & 2) ? nullptr : shape.data();
  t.strides = (which & 4) ? nullptr : strides.data();
  t.byte_offset = (which & 8) ? r.take<uint64_t>() : r.take<uint8_t>() % 16;
  if (ndim < 0 || ndim > 64) t.shape = shape.data();  // only ndim is wrong
  // The shape/strides arrays only hold `stored` entries: keep the reader
  // within them when ndim is out of range (view_from_managed refuses it).
  // Read as a consumer reads a managed tensor it took over (view_from_managed:
  // the version, the flags, the view, validate() and the folded byte_offset).
  dla::DLManagedTensorVersioned managed{};
  managed.version = {(which & 16) ? r.take<uint32_t>() : dla::kDLPackMajorVersion, 0};
  managed.flags = r.take<uint8_t>();
  managed.dl_tensor = t;
  dla::TensorView v;
  bool copied = false;
  try {
    dla::view_from_managed(managed, &v, &copied);
  } catch (const dla::Error&) {
    return;
  }
  // Not every validated view lies inside this block; only those that do
  // are copied and cut into further views.
  try {
    dla::validate_within(v, block.data(), len);
  } catch (const dla::Error&) {
    return;
  }
  copy_if_small(v);
  fuzz_views(r, v, block.data(), len);
  // Managed tensors describing the view.
  if (r.take<uint8_t>() & 1) {
    try {
      dla::DLManagedTensorVersioned* m = dla::new_versioned(v, 0, nullptr, nullptr);
      dla::TensorView back;
      dla::view_from_dltensor(m->dl_tensor, &back);
      dla::validate_within(back, block.data(), len);
      dla::free_managed_block(m);
      dla::ArrayInterfaceStruct* s = dla::new_array_struct(v);
      dla::free_array_struct(s);
    } catch (const dla::Error&) {
    }
  }
}

void fuzz_array_struct(Reader& r) {
  std::vector<uint8_t> block(64);
  int32_t nd = static_cast<int32_t>(r.take<uint8_t>() % 6);
  if (r.take<uint8_t>() == 255) nd = r.take<int32_t>();
  int32_t stored = nd > 0 && nd <= 64 ? nd : 0;
  std::vector<intptr_t> shape(stored + 1), strides(stored + 1);
  for (int32_t i = 0; i < stored; ++i) shape[i] = r.extent();
  for (int32_t i = 0; i < stored; ++i) strides[i] = r.extent();
  uint8_t which = r.take<uint8_t>();
  dla::ArrayInterfaceStruct s{};
  s.two = (which & 1) ? r.take<int32_t>() : 2;
  s.nd = nd;
  s.typekind = r.take<char>();
  s.itemsize = (which & 2) ? r.take<int32_t>() : r.take<uint8_t>() % 17;
  s.flags = r.take<int32_t>();
  s.shape = (which & 4) ? nullptr : shape.data();
  s.strides = (which & 8) ? nullptr : strides.data();
  s.data = (which & 16) ? nullptr : block.data();
  if (nd < 0 || nd > 64) s.shape = nullptr;  // a lying nd must not be read past
  dla::TensorView v;
  try {
    dla::view_from_array_struct(s, &v);
  } catch (const dla::Error&) {
  }
}

void fuzz_dtype_text(Reader& r) {
  std::string text = r.text(24);
  int64_t itemsize = r.extent();
  try {
    (void)dla::dtype_from_pep3118(text.c_str(), itemsize);
  } catch (const dla::Error&) {
  }
  try {
    (void)dla::dtype_from_typestr(text.c_str());
  } catch (const dla::Error&) {
  }
  try {
    dla::DLDataType dt = dla::dtype_from_name(text);
    (void)dla::dtype_name(dt);
  } catch (const dla::Error&) {
  }
  dla::DLDataType dt{r.take<uint8_t>(), r.take<uint8_t>(), r.take<uint16_t>()};
  (void)dla::dtype_name(dt);
  (void)dla::dtype_is_supported(dt);
  (void)dla::pep3118_from_dtype(dt);
  (void)dla::typestr_from_dtype(dt);
  try {
    (void)dla::dtype_itemsize(dt);
  } catch (const dla::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r(data, size);
  switch (r.take<uint8_t>() % 3) {
    case 0: fuzz_dltensor(r); break;
    case 1: fuzz_array_struct(r); break;
    default: fuzz_dtype_text(r); break;
  }
  return 0;
}
