/* Streams, their pending work and events: where queued writes and copies
 * land, and the entry points that wait for them (state.h: the model). */
#include "state.h"

/* ---- streams and pending work ------------------------------------------------ */
#define MAX_STREAMS 1024
Stream streams[MAX_STREAMS];
int nstreams = 0;
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
CUresult stream_(void* h, int ctx, int* out) {
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
unsigned long long enqueue_(int si, Op op) {
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
void run_(int si, unsigned long long upto) {
  Stream* s = &streams[si];
  while (s->done < upto && s->head < s->nops) {
    Op op = s->ops[s->head++];
    execute_(si, &op);
    free(op.data);
    s->done = op.seq;
  }
  if (s->head == s->nops) s->head = s->nops = 0;
}

void run_all_(int ctx) {
  for (int i = 0; i < nstreams; ++i)
    if (ctx < 0 || streams[i].ctx == ctx) run_(i, streams[i].enqueued);
}

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
    enqueue_(
        si, (Op){.type = OP_WRITE, .dst = dst, .data = data, .width = n, .height = 1, .dpitch = n});
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

/* ---- driver entry points: streams and events -------------------------------------- */
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
