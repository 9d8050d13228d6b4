/* A fake CUDA driver for the tests (docs/cuda.md, "Testing without a GPU";
 * the model and its limits: README.md next to this file).
 *
 * Exports the driver entry points dlpackarray's core loads, records every
 * call in a text log readable through fake_log(), and simulates what a real
 * driver would refuse or delay: per-thread current contexts, primary and
 * created contexts, the legacy, per-thread and created streams, events bound
 * to their context, work pending on a stream until something waits for it,
 * the copy-pitch limit and blocking synchronisation.  "Device" memory is host
 * memory mapped PROT_NONE except while a fake copy runs, so any direct host
 * read of device memory by the code under test faults.
 *
 * Error codes are the real ones (cuda.h's cudaError_enum).  Functions named
 * fake_* are the tests' controls, called through ctypes (__init__.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  E_INVALID_VALUE = 1,
  E_OUT_OF_MEMORY = 2,
  E_NOT_INITIALIZED = 3,
  E_INVALID_DEVICE = 101,
  E_INVALID_CONTEXT = 201,
  E_INVALID_HANDLE = 400,
  E_NOT_READY = 600,
  E_ILLEGAL_ADDRESS = 700,
  E_CONTEXT_IS_DESTROYED = 709,
};

enum { KIND_DEVICE = 0, KIND_HOST = 1, KIND_MANAGED = 2 };

/* One lock for all state: entry points run from many threads at once (the
 * code under test releases the GIL around blocking calls). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)

/* ---- log ------------------------------------------------------------------ */
static char* log_buf = NULL;
static size_t log_len = 0, log_cap = 0;
static int logging = 1;

/* Called with the lock held. */
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

/* Benchmarks switch the log off: it would grow without bound. */
void fake_set_logging(int on) { logging = on; }
/* A snapshot: other threads may log (and move the buffer) meanwhile. */
const char* fake_log(void) {
  static char* snapshot = NULL;
  LOCK();
  free(snapshot);
  snapshot = strdup(log_buf ? log_buf : "");
  UNLOCK();
  return snapshot;
}
void fake_log_clear(void) {
  LOCK();
  log_len = 0;
  if (log_buf) log_buf[0] = '\0';
  UNLOCK();
}

/* Error injection: the call of `fail_name` after `fail_skip` more returns
 * `fail_code` (fake_fail_next: the next call). */
static char fail_name[64];
static int fail_code, fail_skip;
void fake_fail_after(const char* name, int code, int skip) {
  snprintf(fail_name, sizeof fail_name, "%s", name);
  fail_code = code;
  fail_skip = skip;
}
void fake_fail_next(const char* name, int code) { fake_fail_after(name, code, 0); }
static int asked_to_fail(const char* name, CUresult* r) {
  if (fail_name[0] && strcmp(fail_name, name) == 0) {
    if (fail_skip-- > 0) return 0;
    fail_name[0] = '\0';
    *r = fail_code;
    return 1;
  }
  return 0;
}

/* ---- initialisation, fork ------------------------------------------------- */
static int initialised = 0;
static pid_t init_pid = 0;
static int device_count = 2;
void fake_set_device_count(int n) { device_count = n; }

/* Every entry point but cuInit, cuDriverGetVersion and the error-name calls
 * needs cuInit first, in this process: a forked child inherits the parent's
 * "initialised" state but not a usable driver, and fails every call. */
static CUresult need_init(void) {
  if (!initialised) return E_NOT_INITIALIZED;
  if (getpid() != init_pid) return E_NOT_INITIALIZED;
  return OK;
}

/* ---- allocations ------------------------------------------------------------ */
typedef struct {
  char* base;
  size_t size;   /* requested */
  size_t mapped; /* page-rounded */
  int kind;
  int device;
} Alloc;

#define MAX_ALLOCS 4096
static Alloc allocs[MAX_ALLOCS];
static size_t device_bytes = 0;
/* Copies of more bytes than this are checked and logged but move nothing:
 * tests describing arrays of several GiB copy none of it. */
static size_t copy_data_limit = (size_t)-1;
void fake_set_copy_data_limit(size_t bytes) { copy_data_limit = bytes; }
static size_t memory_limit = (size_t)1 << 62;

static Alloc* find(uintptr_t p, size_t n) {
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    Alloc* a = &allocs[i];
    if (a->base && p >= (uintptr_t)a->base && n <= a->size &&
        p - (uintptr_t)a->base <= a->size - n)
      return a;
  }
  return NULL;
}

static void expose(Alloc* a, int on) {
  if (a && a->kind == KIND_DEVICE)
    mprotect(a->base, a->mapped, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* MAP_NORESERVE: a test may reserve gigabytes of address space (copies over
 * 2 GiB) and touch a few pages only. */
static void* alloc_(size_t size, int kind, int device) {
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

static int free_(void* p) {
  Alloc* a = find((uintptr_t)p, 1);
  if (!a || a->base != p) return 1;
  if (a->kind == KIND_DEVICE) device_bytes -= a->size;
  munmap(a->base, a->mapped);
  memset(a, 0, sizeof *a);
  return 0;
}

/* ---- contexts --------------------------------------------------------------- */
/* Slot d < MAX_DEVICES is device d's primary context; created contexts follow. */
#define MAX_DEVICES 16
#define MAX_CTX 64
typedef struct {
  int used, device, primary, destroyed, retains;
  CUresult sticky; /* an asynchronous error, reported by every later sync */
} Ctx;
static Ctx ctxs[MAX_CTX];
static uintptr_t ctx_handle(int i) { return 0xC0000 + 0x100 * (uintptr_t)i; }
static int ctx_index(void* h) {
  uintptr_t v = (uintptr_t)h;
  if (v < 0xC0000 || (v - 0xC0000) % 0x100) return -1;
  uintptr_t i = (v - 0xC0000) / 0x100;
  return i < MAX_CTX && ctxs[i].used ? (int)i : -1;
}
static int primary_(int dev) {
  if (dev < 0 || dev >= MAX_DEVICES) return -1;
  if (!ctxs[dev].used) ctxs[dev] = (Ctx){1, dev, 1, 0, 0, OK};
  return dev;
}

/* The calling thread's context stack (cuCtxPush/Pop/Set/GetCurrent). */
static __thread int ctx_stack[64];
static __thread int ctx_depth = 0;

static CUresult current_(int* out) {
  CUresult r = need_init();
  if (r) return r;
  if (ctx_depth == 0) return E_INVALID_CONTEXT;
  int c = ctx_stack[ctx_depth - 1];
  if (ctxs[c].destroyed) return E_CONTEXT_IS_DESTROYED;
  *out = c;
  return OK;
}

/* ---- streams and pending work ------------------------------------------------ */
enum { OP_NOP, OP_WAIT, OP_WRITE, OP_COPY };
typedef struct {
  int type;
  unsigned long long seq;
  int wstream; /* OP_WAIT: until stream wstream has run op wseq */
  unsigned long long wseq;
  char* dst; /* OP_WRITE, OP_COPY */
  const char* src;
  char* data; /* OP_WRITE: the bytes the "kernel" writes */
  size_t width, height, spitch, dpitch;
  int src_host, dst_host;
} Op;

enum { ST_FREE, ST_CREATED, ST_LEGACY, ST_PER_THREAD, ST_DESTROYED };
typedef struct {
  int kind, ctx;
  unsigned flags; /* CU_STREAM_NON_BLOCKING = 1 */
  uintptr_t handle;
  Op* ops;
  size_t head, nops, cap;
  unsigned long long enqueued, done;
} Stream;

#define MAX_STREAMS 1024
static Stream streams[MAX_STREAMS];
static int nstreams = 0;
static int legacy_of[MAX_CTX]; /* stream index + 1 */
/* The per-thread default stream of (this thread, context): stream index + 1. */
static __thread int per_thread_of[MAX_CTX];

static int new_stream_(int kind, int ctx, unsigned flags, uintptr_t handle) {
  if (nstreams == MAX_STREAMS) return -1;
  int i = nstreams++;
  streams[i] = (Stream){kind, ctx, flags, handle, NULL, 0, 0, 0, 0, 0};
  return i;
}
static int legacy_(int ctx) {
  if (!legacy_of[ctx]) legacy_of[ctx] = new_stream_(ST_LEGACY, ctx, 0, 1) + 1;
  return legacy_of[ctx] - 1;
}
static int per_thread_(int ctx) {
  if (!per_thread_of[ctx]) per_thread_of[ctx] = new_stream_(ST_PER_THREAD, ctx, 0, 2) + 1;
  return per_thread_of[ctx] - 1;
}

/* What a stream handle names, for a call whose current context is `ctx`
 * (-1: none; then the special handles cannot be resolved). */
static CUresult stream_(void* h, int ctx, int* out) {
  uintptr_t v = (uintptr_t)h;
  if (v == 0 || v == 1 || v == 2) {
    if (ctx < 0) return E_INVALID_CONTEXT;
    *out = v == 2 ? per_thread_(ctx) : legacy_(ctx);
    return *out < 0 ? E_OUT_OF_MEMORY : OK;
  }
  for (int i = 0; i < nstreams; ++i) {
    if (streams[i].handle == v && streams[i].kind == ST_CREATED) {
      if (ctxs[streams[i].ctx].destroyed) return E_INVALID_HANDLE;
      *out = i;
      return OK;
    }
  }
  return E_INVALID_HANDLE;
}

static int blocking_(const Stream* s) {
  return s->kind == ST_PER_THREAD || (s->kind == ST_CREATED && !(s->flags & 1));
}
static int pending_(const Stream* s) { return s->enqueued > s->done; }

static void push_(int si, Op op) {
  Stream* s = &streams[si];
  if (s->nops == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 16;
    s->ops = realloc(s->ops, s->cap * sizeof(Op));
  }
  op.seq = ++s->enqueued;
  s->ops[s->nops++] = op;
}

static void wait_op_(int si, int on) {
  if (!pending_(&streams[on])) return;
  push_(si, (Op){.type = OP_WAIT, .wstream = on, .wseq = streams[on].enqueued});
}

/* Enqueues `op` on stream si and returns the sequence number that completes
 * it.  The legacy stream's implicit synchronisation: work on it waits for
 * all blocking streams of its context, and work on a blocking stream waits
 * for the legacy stream.  A NOP (an event record) on a stream with nothing
 * pending is already complete. */
static unsigned long long enqueue_(int si, Op op) {
  Stream* s = &streams[si];
  if (s->kind == ST_LEGACY) {
    for (int i = 0; i < nstreams; ++i)
      if (i != si && streams[i].ctx == s->ctx && blocking_(&streams[i])) wait_op_(si, i);
  } else if (blocking_(s) && legacy_of[s->ctx]) {
    wait_op_(si, legacy_of[s->ctx] - 1);
  }
  if (op.type == OP_NOP && !pending_(&streams[si])) return streams[si].done;
  push_(si, op);
  return streams[si].enqueued;
}

static void run_(int si, unsigned long long upto);

static void execute_(int si, Op* op) {
  Stream* s = &streams[si];
  if (op->type == OP_WAIT) {
    run_(op->wstream, op->wseq);
    return;
  }
  if (op->type == OP_NOP) return;
  size_t sspan = op->type == OP_COPY ? op->spitch * (op->height - 1) + op->width : 0;
  size_t dspan = op->dpitch * (op->height - 1) + op->width;
  Alloc* sa = op->type == OP_COPY && !op->src_host ? find((uintptr_t)op->src, sspan) : NULL;
  Alloc* da = op->dst_host ? NULL : find((uintptr_t)op->dst, dspan);
  if ((op->type == OP_COPY && !op->src_host && !sa) || (!op->dst_host && !da)) {
    /* Freed before the work ran: a real GPU faults (or reads reused memory). */
    logf_("ASYNC ERROR illegal address on stream=0x%lx (memory freed before the work ran)",
          (unsigned long)s->handle);
    ctxs[s->ctx].sticky = E_ILLEGAL_ADDRESS;
    return;
  }
  if (op->width * op->height > copy_data_limit) {
    logf_("SKIPPED copy of %zu bytes (over the copy data limit)", op->width * op->height);
    return;
  }
  expose(sa, 1);
  expose(da, 1);
  if (op->type == OP_WRITE) {
    memcpy(op->dst, op->data, op->width);
  } else {
    for (size_t r = 0; r < op->height; ++r)
      memcpy(op->dst + r * op->dpitch, op->src + r * op->spitch, op->width);
  }
  expose(sa, 0);
  expose(da, 0);
}

/* Runs stream si's work up to sequence number `upto`: the only place
 * pending writes and copies land. */
static void run_(int si, unsigned long long upto) {
  Stream* s = &streams[si];
  while (s->done < upto && s->head < s->nops) {
    Op op = s->ops[s->head++];
    execute_(si, &op);
    free(op.data);
    s->done = op.seq;
  }
  if (s->head == s->nops) s->head = s->nops = 0;
}

static void run_all_(int ctx) {
  for (int i = 0; i < nstreams; ++i)
    if (ctx < 0 || streams[i].ctx == ctx) run_(i, streams[i].enqueued);
}

/* ---- blocking ------------------------------------------------------------------- */
static long sync_delay_us = 0;
static int gate_closed = 0, blocked = 0, gate_timeouts = 0;
static long gate_timeout_ms = 30000;

/* A blocking call first lands the work, then holds the caller (the lock
 * released) for the configured delay and while the test keeps the gate
 * closed (at most gate_timeout_ms, counted in fake_gate_timeouts()). */
static void block_(const char* what) {
  ++blocked;
  if (sync_delay_us > 0) {
    UNLOCK();
    struct timespec ts = {sync_delay_us / 1000000, (sync_delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    LOCK();
  }
  if (gate_closed) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (gate_timeout_ms % 1000) * 1000000LL;
    until.tv_sec += gate_timeout_ms / 1000 + ns / 1000000000LL;
    until.tv_nsec = ns % 1000000000LL;
    while (gate_closed) {
      if (pthread_cond_timedwait(&gate_cv, &mu, &until) == ETIMEDOUT) {
        ++gate_timeouts;
        logf_("GATE TIMEOUT in %s", what);
        break;
      }
    }
  }
  --blocked;
}

void fake_set_sync_delay_us(long us) { sync_delay_us = us; }
void fake_set_gate_timeout_ms(long ms) { gate_timeout_ms = ms; }
void fake_gate_close(void) {
  LOCK();
  gate_closed = 1;
  UNLOCK();
}
void fake_gate_open(void) {
  LOCK();
  gate_closed = 0;
  pthread_cond_broadcast(&gate_cv);
  UNLOCK();
}
int fake_blocked(void) {
  LOCK();
  int n = blocked;
  UNLOCK();
  return n;
}
int fake_gate_timeouts(void) { return gate_timeouts; }

/* ---- events -------------------------------------------------------------------- */
/* Indexed by handle; benchmarks that create more events than slots reuse
 * them, harmlessly (each is destroyed before reuse). */
#define EVENT_SLOTS 65536
typedef struct {
  unsigned char live, recorded;
  int ctx, stream;
  unsigned long long seq;
} Event;
static Event events[EVENT_SLOTS];
static unsigned long next_event = 0xE000;
static int live_events = 0;

static Event* event_(void* ev) {
  uintptr_t e = (uintptr_t)ev;
  Event* x = e >= 0xE000 ? &events[(e - 0xE000) % EVENT_SLOTS] : NULL;
  return x && x->live ? x : NULL;
}
static void* new_event_(int ctx) {
  void* ev = (void*)(uintptr_t)(next_event++);
  Event* x = &events[((uintptr_t)ev - 0xE000) % EVENT_SLOTS];
  if (!x->live) ++live_events;
  *x = (Event){1, 0, ctx, 0, 0};
  return ev;
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
static long long max_pitch = 2147483647LL;
void fake_set_max_pitch(long long bytes) { max_pitch = bytes; }

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

/* A stream created in `ctx` by "another library": `handle` chosen by the test
 * (0: the fake picks one).  Returns the handle, NULL on failure. */
void* fake_stream_create(void* ctx, unsigned flags, uintptr_t handle) {
  LOCK();
  static uintptr_t next_handle = 0x5F000000;
  int c = ctx_index(ctx);
  void* out = NULL;
  if (c >= 0 && handle > 2) {
    for (int i = 0; i < nstreams; ++i)
      if (streams[i].handle == handle && streams[i].kind == ST_CREATED) c = -1;
  }
  if (c >= 0) {
    if (!handle) handle = (next_handle += 0x100);
    if (new_stream_(ST_CREATED, c, flags, handle) >= 0) out = (void*)handle;
  }
  UNLOCK();
  return out;
}

/* A "kernel" launched on `stream` (handles 0, 1 and 2 resolved in `ctx`, for
 * the calling thread) that writes n bytes at dst: device, pinned or managed
 * memory.  The bytes land only when something waits for that stream. */
CUresult fake_launch_write(void* ctx, void* stream, void* dst, const void* src, size_t n) {
  LOCK();
  int c = ctx_index(ctx), si = -1;
  CUresult r = c < 0 ? E_INVALID_CONTEXT : stream_(stream, c, &si);
  if (!r && streams[si].ctx != c) r = E_INVALID_HANDLE;
  if (!r && !find((uintptr_t)dst, n)) r = E_INVALID_VALUE;
  if (!r) {
    char* data = malloc(n ? n : 1);
    memcpy(data, src, n);
    enqueue_(si, (Op){.type = OP_WRITE, .dst = dst, .data = data, .width = n, .height = 1,
                      .dpitch = n});
  }
  logf_("LAUNCH write stream=0x%lx dst=0x%lx n=%zu -> %d", (unsigned long)(uintptr_t)stream,
        (unsigned long)(uintptr_t)dst, n, r);
  UNLOCK();
  return r;
}

/* Operations not yet run on `stream` (resolved in ctx, for this thread); -1
 * for an unknown stream.  fake_pending_total(): over every stream. */
long fake_pending(void* ctx, void* stream) {
  LOCK();
  int si = -1;
  long n = stream_(stream, ctx_index(ctx), &si) ? -1 : (long)(streams[si].nops - streams[si].head);
  UNLOCK();
  return n;
}
long fake_pending_total(void) {
  LOCK();
  long n = 0;
  for (int i = 0; i < nstreams; ++i) n += (long)(streams[i].nops - streams[i].head);
  UNLOCK();
  return n;
}
/* The asynchronous error a context holds (0: none). */
int fake_sticky_error(void* ctx) {
  int c = ctx_index(ctx);
  return c < 0 ? -1 : ctxs[c].sticky;
}

/* Test-side: an event made by "another library" in device 0's primary
 * context (fake_new_event_in: in `ctx`). */
void* fake_new_event_in(void* ctx) {
  LOCK();
  int c = ctx_index(ctx);
  void* ev = c < 0 ? NULL : new_event_(c);
  UNLOCK();
  return ev;
}
void* fake_new_event(void) { return fake_new_event_in(fake_primary_ctx(0)); }
int fake_live_events(void) { return live_events; }

/* ---- driver entry points ------------------------------------------------------------ */
#define ENTRY(name)        \
  CUresult r = OK;         \
  LOCK();                  \
  if (asked_to_fail(name, &r)) goto out;
#define CHECK(expr)        \
  do {                     \
    if ((r = (expr))) goto out; \
  } while (0)
#define EXIT \
  out:       \
  UNLOCK();  \
  return r;

CUresult cuInit(unsigned flags) {
  ENTRY("cuInit");
  logf_("cuInit %u", flags);
  if (flags != 0) CHECK(E_INVALID_VALUE);
  if (initialised && getpid() != init_pid) CHECK(E_NOT_INITIALIZED);
  if (!initialised) init_pid = getpid();
  initialised = 1;
  EXIT
}

CUresult cuDriverGetVersion(int* v) {
  if (!v) return E_INVALID_VALUE;
  *v = 13000;
  return OK;
}

static const struct {
  int code;
  const char *name, *text;
} error_table[] = {
    {OK, "CUDA_SUCCESS", "no error"},
    {E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {E_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {E_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {E_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {E_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {E_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {E_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult e) {
  for (size_t i = 0; i < sizeof error_table / sizeof error_table[0]; ++i)
    if (error_table[i].code == e) return (int)i;
  return -1;
}

/* As the real driver: an unknown code is CUDA_ERROR_INVALID_VALUE, *name NULL. */
CUresult cuGetErrorName(CUresult e, const char** name) {
  if (!name) return E_INVALID_VALUE;
  int i = error_index(e);
  *name = i < 0 ? NULL : error_table[i].name;
  return i < 0 ? E_INVALID_VALUE : OK;
}
CUresult cuGetErrorString(CUresult e, const char** text) {
  if (!text) return E_INVALID_VALUE;
  int i = error_index(e);
  *text = i < 0 ? NULL : error_table[i].text;
  return i < 0 ? E_INVALID_VALUE : OK;
}

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

CUresult cuStreamCreate(void** out, unsigned flags) {
  ENTRY("cuStreamCreate");
  int c;
  CHECK(current_(&c));
  if (flags > 1) CHECK(E_INVALID_VALUE);
  UNLOCK();
  *out = fake_stream_create((void*)ctx_handle(c), flags, 0);
  LOCK();
  if (!*out) CHECK(E_OUT_OF_MEMORY);
  EXIT
}

CUresult cuStreamDestroy_v2(void* stream) {
  ENTRY("cuStreamDestroy_v2");
  CHECK(need_init());
  int si;
  if ((uintptr_t)stream <= 2) CHECK(E_INVALID_HANDLE);
  CHECK(stream_(stream, -1, &si));
  run_(si, streams[si].enqueued); /* pending work still completes */
  streams[si].kind = ST_DESTROYED;
  EXIT
}

CUresult cuStreamGetCtx(void* stream, void** ctx) {
  ENTRY("cuStreamGetCtx");
  CHECK(need_init());
  int c = -1, si;
  if ((uintptr_t)stream <= 2) CHECK(current_(&c));
  CHECK(stream_(stream, c, &si));
  *ctx = (void*)ctx_handle(streams[si].ctx);
  EXIT
}

CUresult cuStreamQuery(void* stream) {
  ENTRY("cuStreamQuery");
  int c = -1, si;
  CHECK(need_init());
  if ((uintptr_t)stream <= 2) CHECK(current_(&c));
  CHECK(stream_(stream, c, &si));
  r = pending_(&streams[si]) ? E_NOT_READY : OK;
  EXIT
}

CUresult cuStreamSynchronize(void* stream) {
  ENTRY("cuStreamSynchronize");
  logf_("cuStreamSynchronize stream=0x%lx", (unsigned long)(uintptr_t)stream);
  int c = -1, si;
  CHECK(need_init());
  if ((uintptr_t)stream <= 2) CHECK(current_(&c));
  CHECK(stream_(stream, c, &si));
  run_(si, streams[si].enqueued);
  block_("cuStreamSynchronize");
  r = ctxs[streams[si].ctx].sticky;
  EXIT
}

CUresult cuEventCreate(void** ev, unsigned flags) {
  ENTRY("cuEventCreate");
  int c;
  CHECK(current_(&c));
  if (flags & ~0xFu) CHECK(E_INVALID_VALUE);
  *ev = new_event_(c);
  logf_("cuEventCreate ev=0x%lx flags=%u dev=%d", (unsigned long)(uintptr_t)*ev, flags,
        ctxs[c].device);
  EXIT
}

/* The event and the stream must belong to one context (else
 * CUDA_ERROR_INVALID_HANDLE, as documented). */
CUresult cuEventRecord(void* ev, void* stream) {
  ENTRY("cuEventRecord");
  logf_("cuEventRecord ev=0x%lx stream=0x%lx", (unsigned long)(uintptr_t)ev,
        (unsigned long)(uintptr_t)stream);
  int c = -1, si;
  CHECK(need_init());
  Event* e = event_(ev);
  if (!e) CHECK(E_INVALID_HANDLE);
  if ((uintptr_t)stream <= 2) CHECK(current_(&c));
  CHECK(stream_(stream, c, &si));
  if (streams[si].ctx != e->ctx) {
    logf_("MISMATCH cuEventRecord: event of dev=%d, stream of dev=%d", ctxs[e->ctx].device,
          ctxs[streams[si].ctx].device);
    CHECK(E_INVALID_HANDLE);
  }
  e->recorded = 1;
  e->stream = si;
  e->seq = enqueue_(si, (Op){.type = OP_NOP});
  EXIT
}

/* The event may come from another context or device (documented). */
CUresult cuStreamWaitEvent(void* stream, void* ev, unsigned flags) {
  ENTRY("cuStreamWaitEvent");
  logf_("cuStreamWaitEvent stream=0x%lx ev=0x%lx flags=%u", (unsigned long)(uintptr_t)stream,
        (unsigned long)(uintptr_t)ev, flags);
  int c = -1, si;
  CHECK(need_init());
  Event* e = event_(ev);
  if (!e) CHECK(E_INVALID_HANDLE);
  if (flags != 0) CHECK(E_INVALID_VALUE);
  if ((uintptr_t)stream <= 2) CHECK(current_(&c));
  CHECK(stream_(stream, c, &si));
  if (e->recorded && streams[e->stream].done < e->seq)
    enqueue_(si, (Op){.type = OP_WAIT, .wstream = e->stream, .wseq = e->seq});
  EXIT
}

CUresult cuEventSynchronize(void* ev) {
  ENTRY("cuEventSynchronize");
  logf_("cuEventSynchronize ev=0x%lx", (unsigned long)(uintptr_t)ev);
  CHECK(need_init());
  Event* e = event_(ev);
  if (!e) CHECK(E_INVALID_HANDLE);
  int ctx = e->ctx;
  if (e->recorded) run_(e->stream, e->seq);
  block_("cuEventSynchronize");
  r = ctxs[ctx].sticky;
  EXIT
}

CUresult cuEventQuery(void* ev) {
  ENTRY("cuEventQuery");
  CHECK(need_init());
  Event* e = event_(ev);
  if (!e) CHECK(E_INVALID_HANDLE);
  r = e->recorded && streams[e->stream].done < e->seq ? E_NOT_READY : OK;
  EXIT
}

CUresult cuEventDestroy_v2(void* ev) {
  ENTRY("cuEventDestroy_v2");
  logf_("cuEventDestroy ev=0x%lx", (unsigned long)(uintptr_t)ev);
  CHECK(need_init());
  Event* e = event_(ev);
  if (!e) CHECK(E_INVALID_HANDLE);
  e->live = 0;
  --live_events;
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
  enqueue_(si, (Op){.type = OP_COPY, .dst = dst, .src = src, .width = width, .height = height,
                    .spitch = spitch, .dpitch = dpitch, .src_host = src_host,
                    .dst_host = dst_host});
  return OK;
}

CUresult cuMemcpy2DAsync_v2(const Memcpy2D* c, void* stream) {
  ENTRY("cuMemcpy2DAsync_v2");
  logf_("cuMemcpy2DAsync stream=0x%lx src=0x%llx dst=%s width=%zu height=%zu spitch=%zu "
        "dpitch=%zu", (unsigned long)(uintptr_t)stream,
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
  const char* src = c->srcMemoryType == 1 ? (const char*)c->srcHost
                                          : (const char*)(uintptr_t)c->srcDevice;
  char* dst = c->dstMemoryType == 1 ? (char*)c->dstHost : (char*)(uintptr_t)c->dstDevice;
  r = copy_(src, c->srcMemoryType == 1, dst, c->dstMemoryType == 1, c->WidthInBytes, c->Height,
            c->srcPitch, c->dstPitch, stream);
  EXIT
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
  ENTRY("cuMemcpyDtoHAsync_v2");
  logf_("cuMemcpyDtoHAsync stream=0x%lx src=0x%llx n=%zu", (unsigned long)(uintptr_t)stream,
        src, n);
  CHECK(need_init());
  r = copy_((const char*)(uintptr_t)src, 0, dst, 1, n, 1, n, n, stream);
  EXIT
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
  ENTRY("cuMemcpyDtoDAsync_v2");
  logf_("cuMemcpyDtoDAsync stream=0x%lx src=0x%llx n=%zu", (unsigned long)(uintptr_t)stream,
        src, n);
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
  if (!a || (uintptr_t)a->base != p || (a->kind != KIND_DEVICE && a->kind != KIND_MANAGED)) CHECK(E_INVALID_VALUE);
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
  logf_("cuMemAllocManaged bytes=%zu dev=%d flags=%u ptr=0x%llx", bytes, ctxs[c].device, flags,
        *p);
  EXIT
}
