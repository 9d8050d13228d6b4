/* A fake CUDA driver for the tests (docs/cuda.md, "Testing without a GPU").
 *
 * Exports the driver entry points dlpackarray's core loads, records every
 * call in a text log readable through fake_log(), and simulates devices,
 * streams, events, pointer attributes and copies.  "Device" memory is host
 * memory mapped PROT_NONE except while a fake copy routine runs, so any
 * direct host read of device memory by the code under test faults.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { KIND_DEVICE = 0, KIND_HOST = 1, KIND_MANAGED = 2 };

typedef struct {
  char* base;
  size_t size;   /* requested */
  size_t mapped; /* page-rounded */
  int kind;
  int device;
} Alloc;

#define MAX_ALLOCS 4096
static Alloc allocs[MAX_ALLOCS];
static int device_count = 2;
static int ctx_stack[64];
static int ctx_depth = 0;
static unsigned long next_event = 0xE000;
static char* log_buf = NULL;
static size_t log_len = 0, log_cap = 0;
static int initialised = 0;
static int logging = 1;

/* Error injection: the next call of `fail_name` returns `fail_code`. */
static char fail_name[64];
static int fail_code;
void fake_fail_next(const char* name, int code) {
  snprintf(fail_name, sizeof fail_name, "%s", name);
  fail_code = code;
}
#define FAIL_IF_ASKED(name)                                  \
  do {                                                       \
    if (fail_name[0] && strcmp(fail_name, name) == 0) {      \
      fail_name[0] = '\0';                                   \
      return fail_code;                                      \
    }                                                        \
  } while (0)

/* Benchmarks switch the log off: it would grow without bound. */
void fake_set_logging(int on) { logging = on; }

static void logf_(const char* fmt, ...) {
  if (!logging) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  if (log_len + n + 2 > log_cap) {
    log_cap = (log_cap + n + 2) * 2;
    log_buf = realloc(log_buf, log_cap);
  }
  memcpy(log_buf + log_len, line, n);
  log_len += n;
  log_buf[log_len++] = '\n';
  log_buf[log_len] = '\0';
}

/* ---- test-side helpers ------------------------------------------------- */
const char* fake_log(void) { return log_buf ? log_buf : ""; }
void fake_log_clear(void) {
  log_len = 0;
  if (log_buf) log_buf[0] = '\0';
}
void fake_set_device_count(int n) { device_count = n; }

static Alloc* find(uintptr_t p, size_t n) {
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    Alloc* a = &allocs[i];
    if (a->base && p >= (uintptr_t)a->base && p + n <= (uintptr_t)a->base + a->size) return a;
  }
  return NULL;
}

static void expose(Alloc* a, int on) {
  if (a->kind == KIND_DEVICE) mprotect(a->base, a->mapped, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

void* fake_alloc(size_t size, int kind, int device) {
  long page = sysconf(_SC_PAGESIZE);
  size_t mapped = ((size ? size : 1) + page - 1) / page * page;
  void* p = mmap(NULL, mapped, kind == KIND_DEVICE ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (!allocs[i].base) {
      allocs[i] = (Alloc){p, size ? size : 1, mapped, kind, device};
      return p;
    }
  }
  munmap(p, mapped);
  return NULL;
}

int fake_free(void* p) {
  Alloc* a = find((uintptr_t)p, 1);
  if (!a || a->base != p) return 1;
  munmap(a->base, a->mapped);
  memset(a, 0, sizeof *a);
  return 0;
}

/* Test access to device memory, bypassing the protection. */
int fake_write(void* dst, const void* src, size_t n) {
  Alloc* a = find((uintptr_t)dst, n);
  if (!a) return 1;
  expose(a, 1);
  memcpy(dst, src, n);
  expose(a, 0);
  return 0;
}

int fake_read(void* dst, const void* src, size_t n) {
  Alloc* a = find((uintptr_t)src, n);
  if (!a) return 1;
  expose(a, 1);
  memcpy(dst, src, n);
  expose(a, 0);
  return 0;
}

int fake_live_allocations(void) {
  int n = 0;
  for (int i = 0; i < MAX_ALLOCS; ++i) n += allocs[i].base != NULL;
  return n;
}

/* ---- driver entry points ---------------------------------------------- */
CUresult cuInit(unsigned flags) {
  logf_("cuInit %u", flags);
  initialised = 1;
  return 0;
}

CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return 0;
}

CUresult cuGetErrorName(CUresult e, const char** name) {
  *name = e == 1     ? "CUDA_ERROR_INVALID_VALUE"
          : e == 101 ? "CUDA_ERROR_INVALID_DEVICE"
          : e == 400 ? "CUDA_ERROR_INVALID_HANDLE"
                     : "CUDA_ERROR_FAKE";
  return 0;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  if (!initialised) return 3;
  if (ordinal < 0 || ordinal >= device_count) return 101;
  *dev = ordinal;
  return 0;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  logf_("cuDevicePrimaryCtxRetain dev=%d", dev);
  *ctx = (void*)(uintptr_t)(0xC000 + dev);
  return 0;
}

CUresult cuCtxPushCurrent_v2(void* ctx) {
  if (ctx_depth == 64) return 1;
  ctx_stack[ctx_depth++] = (int)((uintptr_t)ctx - 0xC000);
  logf_("cuCtxPushCurrent dev=%d", ctx_stack[ctx_depth - 1]);
  return 0;
}

CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (ctx_depth == 0) return 201;
  --ctx_depth;
  if (ctx) *ctx = (void*)(uintptr_t)(0xC000 + ctx_stack[ctx_depth]);
  logf_("cuCtxPopCurrent");
  return 0;
}

static int current_device(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : -1; }

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  Alloc* a = find((uintptr_t)ptr, 1);
  logf_("cuPointerGetAttribute attr=%d ptr=0x%llx", attribute, ptr);
  if (!a) return 1;
  switch (attribute) {
    case 2: *(int*)data = a->kind == KIND_HOST ? 1 : 2; return 0;
    case 8: *(unsigned*)data = a->kind == KIND_MANAGED; return 0;
    case 9: *(int*)data = a->device; return 0;
    default: return 1;
  }
}

/* Live events, so that a double destroy or a wait on a destroyed event is an
 * error the tests see.  Indexed by handle; benchmarks that create more
 * events than slots reuse them, harmlessly (each is destroyed before reuse). */
#define EVENT_SLOTS 65536
static unsigned char event_live[EVENT_SLOTS];
static int live_events = 0;

static unsigned char* event_slot(void* ev) {
  uintptr_t e = (uintptr_t)ev;
  return e >= 0xE000 ? &event_live[(e - 0xE000) % EVENT_SLOTS] : NULL;
}

static void* new_event(void) {
  void* ev = (void*)(uintptr_t)(next_event++);
  unsigned char* slot = event_slot(ev);
  if (slot && !*slot) {
    *slot = 1;
    ++live_events;
  }
  return ev;
}

static int event_is_live(void* ev) {
  unsigned char* slot = event_slot(ev);
  return slot && *slot;
}

/* Test-side: an event made by "another library" (no context needed). */
void* fake_new_event(void) { return new_event(); }
int fake_live_events(void) { return live_events; }

CUresult cuEventCreate(void** ev, unsigned flags) {
  FAIL_IF_ASKED("cuEventCreate");
  if (current_device() < 0) return 201;
  *ev = new_event();
  logf_("cuEventCreate ev=0x%lx flags=%u dev=%d", (unsigned long)(uintptr_t)*ev, flags,
        current_device());
  return 0;
}

CUresult cuEventRecord(void* ev, void* stream) {
  FAIL_IF_ASKED("cuEventRecord");
  logf_("cuEventRecord ev=0x%lx stream=0x%lx", (unsigned long)(uintptr_t)ev,
        (unsigned long)(uintptr_t)stream);
  return event_is_live(ev) ? 0 : 400;
}

CUresult cuStreamWaitEvent(void* stream, void* ev, unsigned flags) {
  FAIL_IF_ASKED("cuStreamWaitEvent");
  logf_("cuStreamWaitEvent stream=0x%lx ev=0x%lx flags=%u", (unsigned long)(uintptr_t)stream,
        (unsigned long)(uintptr_t)ev, flags);
  return event_is_live(ev) ? 0 : 400;
}

CUresult cuEventSynchronize(void* ev) {
  FAIL_IF_ASKED("cuEventSynchronize");
  logf_("cuEventSynchronize ev=0x%lx", (unsigned long)(uintptr_t)ev);
  return event_is_live(ev) ? 0 : 400;
}

CUresult cuEventDestroy_v2(void* ev) {
  logf_("cuEventDestroy ev=0x%lx", (unsigned long)(uintptr_t)ev);
  if (!event_is_live(ev)) return 400; /* CUDA_ERROR_INVALID_HANDLE */
  *event_slot(ev) = 0;
  --live_events;
  return 0;
}

CUresult cuStreamSynchronize(void* stream) {
  FAIL_IF_ASKED("cuStreamSynchronize");
  if (current_device() < 0) return 201;
  logf_("cuStreamSynchronize stream=0x%lx", (unsigned long)(uintptr_t)stream);
  return 0;
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

CUresult cuMemcpy2DAsync_v2(const Memcpy2D* c, void* stream) {
  FAIL_IF_ASKED("cuMemcpy2DAsync_v2");
  logf_("cuMemcpy2DAsync stream=0x%lx src=0x%llx dst=%s width=%zu height=%zu spitch=%zu "
        "dpitch=%zu", (unsigned long)(uintptr_t)stream,
        c->srcMemoryType == 1 ? (CUdeviceptr)(uintptr_t)c->srcHost : c->srcDevice,
        c->dstMemoryType == 1 ? "host" : "device", c->WidthInBytes, c->Height, c->srcPitch,
        c->dstPitch);
  if (current_device() < 0) return 201;
  if (c->Height == 0 || c->WidthInBytes == 0) return 0;
  if (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes) return 1;
  size_t src_span = c->srcPitch * (c->Height - 1) + c->WidthInBytes;
  size_t dst_span = c->dstPitch * (c->Height - 1) + c->WidthInBytes;
  const char* src = c->srcMemoryType == 1 ? (const char*)c->srcHost
                                          : (const char*)(uintptr_t)c->srcDevice;
  char* dst = c->dstMemoryType == 1 ? (char*)c->dstHost : (char*)(uintptr_t)c->dstDevice;
  Alloc* sa = find((uintptr_t)src, src_span);
  Alloc* da = c->dstMemoryType == 1 ? NULL : find((uintptr_t)dst, dst_span);
  if (c->srcMemoryType != 1 && !sa) return 1; /* outside every allocation */
  if (c->dstMemoryType != 1 && !da) return 1;
  if (sa) expose(sa, 1);
  if (da) expose(da, 1);
  for (size_t r = 0; r < c->Height; ++r)
    memcpy(dst + r * c->dstPitch, src + r * c->srcPitch, c->WidthInBytes);
  if (sa) expose(sa, 0);
  if (da) expose(da, 0);
  return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  FAIL_IF_ASKED("cuMemAlloc_v2");
  if (current_device() < 0) return 201;
  void* q = fake_alloc(bytes, KIND_DEVICE, current_device());
  if (!q) return 2;
  *p = (CUdeviceptr)(uintptr_t)q;
  logf_("cuMemAlloc bytes=%zu dev=%d ptr=0x%llx", bytes, current_device(), *p);
  return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  logf_("cuMemFree ptr=0x%llx", p);
  return fake_free((void*)(uintptr_t)p);
}

/* Pinned and managed allocations (DLPackArray_Empty): host-accessible memory of
 * the matching kind, freed by cuMemFreeHost / cuMemFree. */
CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  FAIL_IF_ASKED("cuMemAllocHost_v2");
  if (current_device() < 0) return 201;
  *p = fake_alloc(bytes, KIND_HOST, current_device());
  if (!*p) return 2;
  logf_("cuMemAllocHost bytes=%zu dev=%d ptr=0x%lx", bytes, current_device(),
        (unsigned long)(uintptr_t)*p);
  return 0;
}

CUresult cuMemFreeHost(void* p) {
  logf_("cuMemFreeHost ptr=0x%lx", (unsigned long)(uintptr_t)p);
  return fake_free(p);
}

CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned flags) {
  FAIL_IF_ASKED("cuMemAllocManaged");
  if (current_device() < 0) return 201;
  void* q = fake_alloc(bytes, KIND_MANAGED, current_device());
  if (!q) return 2;
  *p = (CUdeviceptr)(uintptr_t)q;
  logf_("cuMemAllocManaged bytes=%zu dev=%d flags=%u ptr=0x%llx", bytes, current_device(), flags,
        *p);
  return 0;
}
