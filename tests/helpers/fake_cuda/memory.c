/* Memory: allocations of the three kinds, pointer attributes and the queued
 * copies (state.h: the model). */
#include "state.h"

/* ---- allocations ------------------------------------------------------------ */
#define MAX_ALLOCS 4096
static Alloc allocs[MAX_ALLOCS];
static size_t device_bytes = 0;
/* Copies of more bytes than this are checked and logged but move nothing:
 * tests describing arrays of several GiB copy none of it. */
size_t copy_data_limit = (size_t)-1;
void fake_set_copy_data_limit(size_t bytes) { copy_data_limit = bytes; }
static size_t memory_limit = (size_t)1 << 62;

Alloc* find(uintptr_t p, size_t n) {
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    Alloc* a = &allocs[i];
    if (a->base && p >= (uintptr_t)a->base && n <= a->size && p - (uintptr_t)a->base <= a->size - n)
      return a;
  }
  return NULL;
}

void expose(Alloc* a, int on) {
  if (a && a->kind == KIND_DEVICE)
    mprotect(a->base, a->mapped, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* MAP_NORESERVE: a test may reserve gigabytes of address space (copies over
 * 2 GiB) and touch a few pages only. */
void* alloc_(size_t size, int kind, int device) {
  long page = sysconf(_SC_PAGESIZE);
  size_t mapped = ((size ? size : 1) + page - 1) / page * page;
  void* p = mmap(NULL, mapped, kind == KIND_DEVICE ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (!allocs[i].base) {
      allocs[i] = (Alloc){p, size ? size : 1, mapped, kind, device};
      if (kind == KIND_DEVICE) device_bytes += allocs[i].size;
      return p;
    }
  }
  munmap(p, mapped);
  return NULL;
}

int free_(void* p) {
  Alloc* a = find((uintptr_t)p, 1);
  if (!a || a->base != p) return 1;
  if (a->kind == KIND_DEVICE) device_bytes -= a->size;
  munmap(a->base, a->mapped);
  memset(a, 0, sizeof *a);
  return 0;
}

/* ---- test-side controls (fake_*) --------------------------------------------------- */
void* fake_alloc(size_t size, int kind, int device) {
  LOCK();
  void* p = alloc_(size, kind, device);
  UNLOCK();
  return p;
}
int fake_free(void* p) {
  LOCK();
  int r = free_(p);
  UNLOCK();
  return r;
}

/* Test access to memory, bypassing the protection and any pending work. */
static int access_(void* dst, const void* src, size_t n, const void* probe) {
  LOCK();
  Alloc* a = find((uintptr_t)probe, n);
  if (a) {
    expose(a, 1);
    memcpy(dst, src, n);
    expose(a, 0);
  }
  UNLOCK();
  return a ? 0 : 1;
}
int fake_write(void* dst, const void* src, size_t n) { return access_(dst, src, n, dst); }
int fake_read(void* dst, const void* src, size_t n) { return access_(dst, src, n, src); }

int fake_live_allocations(void) {
  LOCK();
  int n = 0;
  for (int i = 0; i < MAX_ALLOCS; ++i) n += allocs[i].base != NULL;
  UNLOCK();
  return n;
}
void fake_set_memory_limit(size_t bytes) { memory_limit = bytes; }

/* Copy pitch limit: CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2**31 - 1 on current GPUs. */
long long max_pitch = 2147483647LL;
void fake_set_max_pitch(long long bytes) { max_pitch = bytes; }

/* ---- driver entry points: pointer attributes, copies, allocations ------------------ */
/* Needs a current context (the strict reading of its documented
 * CUDA_ERROR_INVALID_CONTEXT); cuPointerGetAttributes does not. */
CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  ENTRY("cuPointerGetAttribute");
  logf_("cuPointerGetAttribute attr=%d ptr=0x%llx", attribute, ptr);
  int c;
  CHECK(current_(&c));
  Alloc* a = find((uintptr_t)ptr, 1);
  if (!a) CHECK(E_INVALID_VALUE);
  switch (attribute) {
    case 2: *(int*)data = a->kind == KIND_HOST ? 1 : 2; break;
    case 8: *(unsigned*)data = a->kind == KIND_MANAGED; break;
    case 9: *(int*)data = a->device; break;
    default: CHECK(E_INVALID_VALUE);
  }
  EXIT
}

/* No context needed; a pointer CUDA does not know gets memory type 0 and
 * success, as documented. */
CUresult cuPointerGetAttributes(unsigned n, int* attributes, void** data, CUdeviceptr ptr) {
  ENTRY("cuPointerGetAttributes");
  logf_("cuPointerGetAttributes n=%u ptr=0x%llx", n, ptr);
  CHECK(need_init());
  if (!attributes || !data) CHECK(E_INVALID_VALUE);
  Alloc* a = find((uintptr_t)ptr, 1);
  for (unsigned i = 0; i < n; ++i) {
    switch (attributes[i]) {
      case 1: *(void**)data[i] = a ? (void*)ctx_handle(primary_(a->device)) : NULL; break;
      case 2: *(unsigned*)data[i] = !a ? 0 : a->kind == KIND_HOST ? 1 : 2; break;
      case 8: *(unsigned*)data[i] = a && a->kind == KIND_MANAGED; break;
      case 9: *(int*)data[i] = a ? a->device : -2; break;
      default: CHECK(E_INVALID_VALUE);
    }
  }
  EXIT
}

typedef struct {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} Memcpy2D;

/* Validates and enqueues a copy on `stream`, which must belong to the
 * current context.  Device-side ranges must lie inside one allocation. */
static CUresult copy_(const char* src, int src_host, char* dst, int dst_host, size_t width,
                      size_t height, size_t spitch, size_t dpitch, void* stream) {
  int c, si;
  CUresult r = current_(&c);
  if (r) return r;
  if ((r = stream_(stream, c, &si))) return r;
  if (streams[si].ctx != c) {
    logf_("MISMATCH copy: stream of dev=%d, current context of dev=%d",
          ctxs[streams[si].ctx].device, ctxs[c].device);
    return E_INVALID_HANDLE;
  }
  if (width == 0 || height == 0) return OK;
  if (spitch < width || dpitch < width) return E_INVALID_VALUE;
  size_t sspan = spitch * (height - 1) + width, dspan = dpitch * (height - 1) + width;
  if (!src_host && !find((uintptr_t)src, sspan)) return E_INVALID_VALUE;
  if (!dst_host && !find((uintptr_t)dst, dspan)) return E_INVALID_VALUE;
  enqueue_(si, (Op){.type = OP_COPY,
                    .dst = dst,
                    .src = src,
                    .width = width,
                    .height = height,
                    .spitch = spitch,
                    .dpitch = dpitch,
                    .src_host = src_host,
                    .dst_host = dst_host});
  return OK;
}

CUresult cuMemcpy2DAsync_v2(const Memcpy2D* c, void* stream) {
  ENTRY("cuMemcpy2DAsync_v2");
  logf_(
      "cuMemcpy2DAsync stream=0x%lx src=0x%llx dst=%s width=%zu height=%zu spitch=%zu "
      "dpitch=%zu",
      (unsigned long)(uintptr_t)stream,
      c->srcMemoryType == 1 ? (CUdeviceptr)(uintptr_t)c->srcHost : c->srcDevice,
      c->dstMemoryType == 1 ? "host" : "device", c->WidthInBytes, c->Height, c->srcPitch,
      c->dstPitch);
  CHECK(need_init());
  int types_ok = (c->srcMemoryType == 1 || c->srcMemoryType == 2) &&
                 (c->dstMemoryType == 1 || c->dstMemoryType == 2);
  if (!types_ok || c->srcXInBytes || c->srcY || c->dstXInBytes || c->dstY) CHECK(E_INVALID_VALUE);
  /* CU_DEVICE_ATTRIBUTE_MAX_PITCH bounds every pitch, whatever the height. */
  if (c->srcPitch > (size_t)max_pitch || c->dstPitch > (size_t)max_pitch) {
    logf_("LIMIT pitch over %lld", max_pitch);
    CHECK(E_INVALID_VALUE);
  }
  const char* src =
      c->srcMemoryType == 1 ? (const char*)c->srcHost : (const char*)(uintptr_t)c->srcDevice;
  char* dst = c->dstMemoryType == 1 ? (char*)c->dstHost : (char*)(uintptr_t)c->dstDevice;
  r = copy_(src, c->srcMemoryType == 1, dst, c->dstMemoryType == 1, c->WidthInBytes, c->Height,
            c->srcPitch, c->dstPitch, stream);
  EXIT
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
  ENTRY("cuMemcpyDtoHAsync_v2");
  logf_("cuMemcpyDtoHAsync stream=0x%lx src=0x%llx n=%zu", (unsigned long)(uintptr_t)stream, src,
        n);
  CHECK(need_init());
  r = copy_((const char*)(uintptr_t)src, 0, dst, 1, n, 1, n, n, stream);
  EXIT
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
  ENTRY("cuMemcpyDtoDAsync_v2");
  logf_("cuMemcpyDtoDAsync stream=0x%lx src=0x%llx n=%zu", (unsigned long)(uintptr_t)stream, src,
        n);
  CHECK(need_init());
  r = copy_((const char*)(uintptr_t)src, 0, (char*)(uintptr_t)dst, 0, n, 1, n, n, stream);
  EXIT
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  ENTRY("cuMemAlloc_v2");
  int c;
  CHECK(current_(&c));
  if (bytes == 0) CHECK(E_INVALID_VALUE);
  if (bytes > memory_limit || device_bytes > memory_limit - bytes) CHECK(E_OUT_OF_MEMORY);
  void* q = alloc_(bytes, KIND_DEVICE, ctxs[c].device);
  if (!q) CHECK(E_OUT_OF_MEMORY);
  *p = (CUdeviceptr)(uintptr_t)q;
  logf_("cuMemAlloc bytes=%zu dev=%d ptr=0x%llx", bytes, ctxs[c].device, *p);
  EXIT
}

/* Synchronises the device first (all its contexts' streams), as the real
 * cuMemFree does, and blocks like any synchronisation. */
CUresult cuMemFree_v2(CUdeviceptr p) {
  ENTRY("cuMemFree_v2");
  logf_("cuMemFree ptr=0x%llx", p);
  int c;
  CHECK(current_(&c));
  Alloc* a = find((uintptr_t)p, 1);
  if (!a || (uintptr_t)a->base != p || (a->kind != KIND_DEVICE && a->kind != KIND_MANAGED))
    CHECK(E_INVALID_VALUE);
  for (int i = 0; i < nstreams; ++i)
    if (ctxs[streams[i].ctx].device == a->device) run_(i, streams[i].enqueued);
  block_("cuMemFree");
  free_((void*)(uintptr_t)p);
  EXIT
}

/* Pinned and managed allocations (DLPackArray_Empty): host-accessible memory of
 * the matching kind, freed by cuMemFreeHost / cuMemFree. */
CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  ENTRY("cuMemAllocHost_v2");
  int c;
  CHECK(current_(&c));
  if (bytes == 0) CHECK(E_INVALID_VALUE);
  void* q = alloc_(bytes, KIND_HOST, ctxs[c].device);
  if (!q) CHECK(E_OUT_OF_MEMORY);
  *p = q;
  logf_("cuMemAllocHost bytes=%zu dev=%d ptr=0x%lx", bytes, ctxs[c].device,
        (unsigned long)(uintptr_t)q);
  EXIT
}

CUresult cuMemFreeHost(void* p) {
  ENTRY("cuMemFreeHost");
  logf_("cuMemFreeHost ptr=0x%lx", (unsigned long)(uintptr_t)p);
  int c;
  CHECK(current_(&c));
  Alloc* a = find((uintptr_t)p, 1);
  if (!a || a->base != p || a->kind != KIND_HOST) CHECK(E_INVALID_VALUE);
  free_(p);
  EXIT
}

CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned flags) {
  ENTRY("cuMemAllocManaged");
  int c;
  CHECK(current_(&c));
  if (bytes == 0 || (flags != 1 && flags != 2)) CHECK(E_INVALID_VALUE);
  void* q = alloc_(bytes, KIND_MANAGED, ctxs[c].device);
  if (!q) CHECK(E_OUT_OF_MEMORY);
  *p = (CUdeviceptr)(uintptr_t)q;
  logf_("cuMemAllocManaged bytes=%zu dev=%d flags=%u ptr=0x%llx", bytes, ctxs[c].device, flags, *p);
  EXIT
}
