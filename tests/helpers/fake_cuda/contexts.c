/* Devices and contexts: the primary and created contexts, each thread's
 * context stack, and their entry points (state.h: the model). */
#include "state.h"

/* ---- devices ------------------------------------------------------------------ */
static int device_count = 2;
void fake_set_device_count(int n) { device_count = n; }

/* ---- contexts --------------------------------------------------------------- */
/* Slot d < MAX_DEVICES is device d's primary context; created contexts follow. */
Ctx ctxs[MAX_CTX];
uintptr_t ctx_handle(int i) { return 0xC0000 + 0x100 * (uintptr_t)i; }
int ctx_index(void* h) {
  uintptr_t v = (uintptr_t)h;
  if (v < 0xC0000 || (v - 0xC0000) % 0x100) return -1;
  uintptr_t i = (v - 0xC0000) / 0x100;
  return i < MAX_CTX && ctxs[i].used ? (int)i : -1;
}
int primary_(int dev) {
  if (dev < 0 || dev >= MAX_DEVICES) return -1;
  if (!ctxs[dev].used) ctxs[dev] = (Ctx){1, dev, 1, 0, 0, OK};
  return dev;
}

/* The calling thread's context stack (cuCtxPush/Pop/Set/GetCurrent). */
static __thread int ctx_stack[64];
static __thread int ctx_depth = 0;

CUresult current_(int* out) {
  CUresult r = need_init();
  if (r) return r;
  if (ctx_depth == 0) return E_INVALID_CONTEXT;
  int c = ctx_stack[ctx_depth - 1];
  if (ctxs[c].destroyed) return E_CONTEXT_IS_DESTROYED;
  *out = c;
  return OK;
}

/* ---- test-side controls (fake_*) --------------------------------------------------- */
void* fake_primary_ctx(int device) {
  LOCK();
  int c = primary_(device);
  UNLOCK();
  return c < 0 ? NULL : (void*)ctx_handle(c);
}

/* A context made with cuCtxCreate by "another library" (not primary). */
void* fake_ctx_create(int device) {
  LOCK();
  void* h = NULL;
  for (int i = MAX_DEVICES; i < MAX_CTX; ++i) {
    if (!ctxs[i].used) {
      ctxs[i] = (Ctx){1, device, 0, 0, 1, OK};
      h = (void*)ctx_handle(i);
      break;
    }
  }
  UNLOCK();
  return h;
}
int fake_ctx_destroy(void* ctx) {
  LOCK();
  int c = ctx_index(ctx);
  if (c >= 0) {
    run_all_(c);
    ctxs[c].destroyed = 1;
  }
  UNLOCK();
  return c < 0;
}
/* This thread's current context (NULL: none) and stack depth. */
void* fake_current_ctx(void) {
  return ctx_depth ? (void*)ctx_handle(ctx_stack[ctx_depth - 1]) : NULL;
}
int fake_ctx_depth(void) { return ctx_depth; }

/* ---- driver entry points: devices and contexts ------------------------------------- */
CUresult cuDeviceGetCount(int* n) {
  ENTRY("cuDeviceGetCount");
  CHECK(need_init());
  *n = device_count;
  EXIT
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  ENTRY("cuDeviceGet");
  CHECK(need_init());
  if (ordinal < 0 || ordinal >= device_count || ordinal >= MAX_DEVICES) CHECK(E_INVALID_DEVICE);
  *dev = ordinal;
  EXIT
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int dev) {
  ENTRY("cuDeviceGetAttribute");
  CHECK(need_init());
  if (dev < 0 || dev >= device_count) CHECK(E_INVALID_DEVICE);
  if (attribute != 11) CHECK(E_INVALID_VALUE); /* only MAX_PITCH is modelled */
  *value = (int)max_pitch;
  logf_("cuDeviceGetAttribute attr=%d dev=%d", attribute, dev);
  EXIT
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  ENTRY("cuDevicePrimaryCtxRetain");
  logf_("cuDevicePrimaryCtxRetain dev=%d", dev);
  CHECK(need_init());
  if (dev < 0 || dev >= device_count) CHECK(E_INVALID_DEVICE);
  int c = primary_(dev);
  ++ctxs[c].retains;
  *ctx = (void*)ctx_handle(c);
  EXIT
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  ENTRY("cuDevicePrimaryCtxRelease_v2");
  CHECK(need_init());
  if (dev < 0 || dev >= device_count) CHECK(E_INVALID_DEVICE);
  if (!ctxs[dev].used || ctxs[dev].retains == 0) CHECK(E_INVALID_CONTEXT);
  --ctxs[dev].retains;
  EXIT
}

CUresult cuCtxPushCurrent_v2(void* ctx) {
  ENTRY("cuCtxPushCurrent_v2");
  CHECK(need_init());
  int c = ctx_index(ctx);
  if (c < 0) CHECK(E_INVALID_CONTEXT);
  if (ctxs[c].destroyed) CHECK(E_CONTEXT_IS_DESTROYED);
  if (ctx_depth == 64) CHECK(E_INVALID_VALUE);
  ctx_stack[ctx_depth++] = c;
  logf_("cuCtxPushCurrent dev=%d", ctxs[c].device);
  EXIT
}

CUresult cuCtxPopCurrent_v2(void** ctx) {
  ENTRY("cuCtxPopCurrent_v2");
  CHECK(need_init());
  if (ctx_depth == 0) CHECK(E_INVALID_CONTEXT);
  --ctx_depth;
  if (ctx) *ctx = (void*)ctx_handle(ctx_stack[ctx_depth]);
  logf_("cuCtxPopCurrent");
  EXIT
}

CUresult cuCtxGetCurrent(void** ctx) {
  ENTRY("cuCtxGetCurrent");
  CHECK(need_init());
  *ctx = ctx_depth ? (void*)ctx_handle(ctx_stack[ctx_depth - 1]) : NULL;
  EXIT
}

/* Replaces the top of this thread's stack (NULL: pops it), as the CUDA
 * runtime does when torch or CuPy select a device. */
CUresult cuCtxSetCurrent(void* ctx) {
  ENTRY("cuCtxSetCurrent");
  CHECK(need_init());
  if (ctx == NULL) {
    if (ctx_depth) --ctx_depth;
    goto out;
  }
  int c = ctx_index(ctx);
  if (c < 0) CHECK(E_INVALID_CONTEXT);
  if (ctx_depth == 0) ctx_depth = 1;
  ctx_stack[ctx_depth - 1] = c;
  logf_("cuCtxSetCurrent dev=%d", ctxs[c].device);
  EXIT
}

CUresult cuCtxGetDevice(int* dev) {
  ENTRY("cuCtxGetDevice");
  int c;
  CHECK(current_(&c));
  *dev = ctxs[c].device;
  EXIT
}

CUresult cuCtxSynchronize(void) {
  ENTRY("cuCtxSynchronize");
  int c;
  CHECK(current_(&c));
  logf_("cuCtxSynchronize dev=%d", ctxs[c].device);
  run_all_(c);
  block_("cuCtxSynchronize");
  r = ctxs[c].sticky;
  EXIT
}
