/* The driver as a whole: the call log, injected failures, initialisation and
 * fork, blocking synchronisation, and the error names (state.h: the model). */
#include "state.h"

/* The lock state.h's LOCK() takes. */
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;

/* ---- log ------------------------------------------------------------------ */
static char* log_buf = NULL;
static size_t log_len = 0, log_cap = 0;
static int logging = 1;

/* Called with the lock held. */
void logf_(const char* fmt, ...) {
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
int asked_to_fail(const char* name, CUresult* r) {
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

/* Every entry point but cuInit, cuDriverGetVersion and the error-name calls
 * needs cuInit first, in this process: a forked child inherits the parent's
 * "initialised" state but not a usable driver, and fails every call. */
CUresult need_init(void) {
  if (!initialised) return E_NOT_INITIALIZED;
  if (getpid() != init_pid) return E_NOT_INITIALIZED;
  return OK;
}

/* ---- blocking ------------------------------------------------------------------- */
static long sync_delay_us = 0;
static int gate_closed = 0, blocked = 0, gate_timeouts = 0;
static long gate_timeout_ms = 30000;

/* A blocking call first lands the work, then holds the caller (the lock
 * released) for the configured delay and while the test keeps the gate
 * closed (at most gate_timeout_ms, counted in fake_gate_timeouts()). */
void block_(const char* what) {
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

/* ---- driver entry points: initialisation, version, error names ------------- */
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
