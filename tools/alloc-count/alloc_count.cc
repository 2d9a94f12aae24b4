// liballoc_count.so: an LD_PRELOAD interposer that counts heap allocations per thread.
//
// malloc, calloc, realloc, memalign, aligned_alloc, posix_memalign, valloc and free are counted
// in the calling thread's slot and forwarded to glibc's own allocator (__libc_*), so the program
// allocates exactly as without the interposer. operator new/delete reach malloc/free through
// libstdc++ and are counted there.
//
// Active only in processes whose program name starts with $ALLOC_COUNT_MATCH (default
// "magnetar"), so a launcher that passes LD_PRELOAD on to every child counts only the broker and
// the load generator. An active process writes one JSON line per snapshot to
// $ALLOC_COUNT_DIR/<program>-<pid>.jsonl: at each SIGUSR2 (taken by a thread of its own with
// sigwaitinfo; the signal is blocked before main, so every thread inherits the mask) and at
// exit. A line holds, per thread that ever allocated, its tid, name (/proc comm), and the
// cumulative allocations, frees and bytes requested. tools/alloc-count/README.md has the method.
//
// Deliberately no C++ standard library here: it would allocate while counting.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void __libc_free(void* p);
extern char* program_invocation_short_name;
}

namespace {

constexpr int kMaxSlots = 8192;

// One thread's counters: written only by that thread, read by the snapshot thread (relaxed).
struct alignas(64) Slot {
  uint64_t allocs;
  uint64_t frees;
  uint64_t bytes;
  int tid;
  char name[16];
};

Slot g_slots[kMaxSlots];
Slot g_overflow;  // threads beyond kMaxSlots share it (atomic adds)
int g_used = 0;
bool g_active = false;
int g_snapshots = 0;
char g_path[512];

__thread Slot* t_slot __attribute__((tls_model("initial-exec"))) = nullptr;
__thread bool t_claimed __attribute__((tls_model("initial-exec"))) = false;

Slot* slot() {
  if (t_slot != nullptr) return t_slot;
  if (t_claimed) return &g_overflow;
  t_claimed = true;
  int i = __atomic_fetch_add(&g_used, 1, __ATOMIC_RELAXED);
  if (i >= kMaxSlots) return &g_overflow;
  g_slots[i].tid = static_cast<int>(syscall(SYS_gettid));
  t_slot = &g_slots[i];
  return t_slot;
}

inline void countAlloc(size_t size) {
  if (!g_active) return;
  Slot* s = slot();
  if (s == &g_overflow) {
    __atomic_fetch_add(&s->allocs, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->bytes, size, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(&s->allocs, s->allocs + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bytes, s->bytes + size, __ATOMIC_RELAXED);
}

inline void countFree(void* p) {
  if (!g_active || p == nullptr) return;
  Slot* s = slot();
  if (s == &g_overflow) {
    __atomic_fetch_add(&s->frees, 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(&s->frees, s->frees + 1, __ATOMIC_RELAXED);
}

// The thread's current name, kept in the slot so that a thread gone by the snapshot keeps it.
void refreshName(Slot* s) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", s->tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[16];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  if (buf[n - 1] == '\n') --n;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == '"' || buf[i] == '\\' || buf[i] < 0x20) buf[i] = '_';
  }
  memcpy(s->name, buf, n);
  s->name[n] = '\0';
}

void writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void snapshot(const char* reason) {
  int fd = open(g_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[256];
  int n = snprintf(line, sizeof line, "{\"pid\":%d,\"snapshot\":%d,\"reason\":\"%s\",\"threads\":[",
                   getpid(), g_snapshots++, reason);
  writeAll(fd, line, n);
  int used = __atomic_load_n(&g_used, __ATOMIC_RELAXED);
  if (used > kMaxSlots) used = kMaxSlots;
  for (int i = 0; i < used; ++i) {
    Slot* s = &g_slots[i];
    refreshName(s);
    n = snprintf(line, sizeof line,
                 "%s{\"tid\":%d,\"name\":\"%s\",\"allocs\":%lu,\"frees\":%lu,"
                 "\"bytes\":%lu}",
                 i == 0 ? "" : ",", s->tid, s->name,
                 (unsigned long)__atomic_load_n(&s->allocs, __ATOMIC_RELAXED),
                 (unsigned long)__atomic_load_n(&s->frees, __ATOMIC_RELAXED),
                 (unsigned long)__atomic_load_n(&s->bytes, __ATOMIC_RELAXED));
    writeAll(fd, line, n);
  }
  n = snprintf(line, sizeof line, "],\"overflow\":{\"allocs\":%lu,\"frees\":%lu}}\n",
               (unsigned long)__atomic_load_n(&g_overflow.allocs, __ATOMIC_RELAXED),
               (unsigned long)__atomic_load_n(&g_overflow.frees, __ATOMIC_RELAXED));
  writeAll(fd, line, n);
  close(fd);
}

void* snapshotThread(void*) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  for (;;) {
    if (sigwaitinfo(&set, nullptr) == SIGUSR2) snapshot("signal");
  }
  return nullptr;
}

void atExit() { snapshot("exit"); }

void ignoreSignal(int) {}

__attribute__((constructor)) void init() {
  const char* dir = getenv("ALLOC_COUNT_DIR");
  const char* match = getenv("ALLOC_COUNT_MATCH");
  if (match == nullptr || *match == '\0') match = "magnetar";
  const char* prog = program_invocation_short_name;
  if (dir == nullptr || prog == nullptr || strncmp(prog, match, strlen(match)) != 0) return;
  snprintf(g_path, sizeof g_path, "%s/%s-%d.jsonl", dir, prog, getpid());
  // A thread that unblocks SIGUSR2 gets it without dying (that snapshot is lost).
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ignoreSignal;
  sigaction(SIGUSR2, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  g_active = true;
  pthread_t t;
  pthread_create(&t, nullptr, snapshotThread, nullptr);
  pthread_setname_np(t, "alloc-count");
  atexit(atExit);
}

}  // namespace

extern "C" {

void* malloc(size_t size) {
  countAlloc(size);
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  countAlloc(n * size);
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  // A realloc is an allocation (and a free of p); realloc(p, 0) only frees.
  if (size != 0) countAlloc(size);
  if (p != nullptr && size == 0) countFree(p);
  if (p != nullptr && size != 0) countFree(p);
  return __libc_realloc(p, size);
}

void free(void* p) {
  countFree(p);
  __libc_free(p);
}

void* memalign(size_t alignment, size_t size) {
  countAlloc(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  countAlloc(size);
  return __libc_memalign(alignment, size);
}

void* valloc(size_t size) {
  countAlloc(size);
  return __libc_valloc(size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  countAlloc(size);
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"
