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
 *
 * This header declares the state the translation units share; each entry point
 * lives with the state it models: driver.c (the log, injected failures,
 * initialisation, blocking, error names), contexts.c (devices and contexts),
 * memory.c (allocations, pointer attributes, copies), streams.c (streams,
 * pending work, events).
 */
#ifndef FAKE_CUDA_STATE_H
#define FAKE_CUDA_STATE_H

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

/* What one translation unit lends another is hidden: the library exports the
 * driver entry points and the fake_* controls, nothing else. */
#pragma GCC visibility push(hidden)

/* One lock for all state: entry points run from many threads at once (the
 * code under test releases the GIL around blocking calls). */
extern pthread_mutex_t mu;
#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)

/* ---- driver.c: log, injected failures, initialisation, blocking ------------ */
void logf_(const char* fmt, ...); /* called with the lock held */
int asked_to_fail(const char* name, CUresult* r);
CUresult need_init(void);
void block_(const char* what);

/* ---- memory.c: allocations ------------------------------------------------- */
typedef struct {
  char* base;
  size_t size;   /* requested */
  size_t mapped; /* page-rounded */
  int kind;
  int device;
} Alloc;

extern size_t copy_data_limit;
extern long long max_pitch; /* CU_DEVICE_ATTRIBUTE_MAX_PITCH */
Alloc* find(uintptr_t p, size_t n);
void expose(Alloc* a, int on);
void* alloc_(size_t size, int kind, int device);
int free_(void* p);

/* ---- contexts.c: contexts ---------------------------------------------------- */
#define MAX_DEVICES 16
#define MAX_CTX 64
typedef struct {
  int used, device, primary, destroyed, retains;
  CUresult sticky; /* an asynchronous error, reported by every later sync */
} Ctx;
extern Ctx ctxs[MAX_CTX];
uintptr_t ctx_handle(int i);
int ctx_index(void* h);
int primary_(int dev);
CUresult current_(int* out);

/* ---- streams.c: streams and pending work -------------------------------------- */
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

extern Stream streams[];
extern int nstreams;
CUresult stream_(void* h, int ctx, int* out);
unsigned long long enqueue_(int si, Op op);
void run_(int si, unsigned long long upto);
void run_all_(int ctx);

/* ---- the entry points' frame: lock, injected failure, unlock ------------------ */
#define ENTRY(name) \
  CUresult r = OK;  \
  LOCK();           \
  if (asked_to_fail(name, &r)) goto out;
#define CHECK(expr)             \
  do {                          \
    if ((r = (expr))) goto out; \
  } while (0)
#define EXIT \
  out:       \
  UNLOCK();  \
  return r;

#pragma GCC visibility pop

/* Exported controls one translation unit calls in another. */
void* fake_primary_ctx(int device);

#endif
