/* faultshim: an LD_PRELOAD library for the chaos suite's unprivileged "slow disk" and "clock
 * jump" faults (tests/chaos/README.md). Built by chaos.py (faultshim.py) with
 *   cc -shared -fPIC -O2 -o faultshim.so faultshim.c -ldl
 *
 * It maps the control file named by MAGNETAR_FAULTSHIM_CTL (created by the nemesis, at least
 * FS_SIZE bytes; no file or a bad magic: the library does nothing) and reads it on every call,
 * so the nemesis changes the values while the process runs. Layout, little-endian int64s:
 *   0  magic "MGFSHIM1"
 *   8  sync_delay_us    slept before each fsync, fdatasync, sync_file_range, msync, syncfs
 *  16  clock_offset_ns  added to CLOCK_REALTIME(_COARSE) in clock_gettime, and to gettimeofday,
 *                       time and timespec_get (a stepped wall clock; CLOCK_MONOTONIC and
 *                       CLOCK_BOOTTIME are left alone, as a real step leaves them)
 *  24  fsync calls, 32 fdatasync calls, 40 sync_file_range calls, 48 msync calls (+ syncfs),
 *  56  calls delayed                            (counters written here)
 *
 * Absolute waits on CLOCK_REALTIME (pthread_cond_timedwait on a realtime condvar,
 * pthread_cond_clockwait, sem_timedwait, clock_nanosleep with TIMER_ABSTIME) get the offset
 * taken off their deadline, so they end when the shifted clock reaches it, as under a real step
 * (without that, a deadline computed from the shifted clock would expire at once or far too
 * late). Not adjusted: realtime timerfds, pthread_mutex_timedlock, file timestamps.
 *
 * Hot path: one relaxed atomic load; no locks, no allocation. glibc only (the condvar's clock is
 * read from glibc's __wrefs bit, as glibc itself does).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define FS_SIZE 64
#define FS_MAGIC 0x314d49485346474dULL /* "MGFSHIM1" as a little-endian uint64 */

enum { F_MAGIC, F_SYNC_DELAY_US, F_CLOCK_OFFSET_NS, C_FSYNC, C_FDATASYNC, C_SFR, C_MSYNC,
       C_DELAYED };

static int64_t *volatile ctl; /* the mapped control words, NULL: off */

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_gettimeofday)(struct timeval *, void *);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_sync_file_range)(int, off_t, off_t, unsigned int);
static int (*real_msync)(void *, size_t, int);
static int (*real_syncfs)(int);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                                  const struct timespec *);
static int (*real_sem_timedwait)(sem_t *, const struct timespec *);
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

static void resolve(void) {
  real_clock_gettime = next("clock_gettime");
  real_gettimeofday = next("gettimeofday");
  real_fsync = next("fsync");
  real_fdatasync = next("fdatasync");
  real_sync_file_range = next("sync_file_range");
  real_msync = next("msync");
  real_syncfs = next("syncfs");
  /* The condvar ABI of glibc 2.3.2 (the default version; 2.2.5's is the old layout). */
  real_cond_timedwait = dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
  if (!real_cond_timedwait) real_cond_timedwait = next("pthread_cond_timedwait");
  real_cond_clockwait = next("pthread_cond_clockwait");
  real_sem_timedwait = next("sem_timedwait");
  real_clock_nanosleep = next("clock_nanosleep");
}

__attribute__((constructor)) static void faultshim_init(void) {
  if (!real_clock_gettime) resolve();
  const char *path = getenv("MAGNETAR_FAULTSHIM_CTL");
  if (!path || !*path) return;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void *p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size >= FS_SIZE) {
    p = mmap(NULL, FS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (p == MAP_FAILED) return;
  if (((uint64_t *)p)[F_MAGIC] != FS_MAGIC) {
    munmap(p, FS_SIZE);
    return;
  }
  ctl = p;
}

#define REAL(f) (real_##f ? real_##f : (resolve(), real_##f))

static inline int64_t load(int i) {
  int64_t *c = ctl;
  return c ? __atomic_load_n(&c[i], __ATOMIC_RELAXED) : 0;
}

static inline void count(int i) {
  int64_t *c = ctl;
  if (c) __atomic_fetch_add(&c[i], 1, __ATOMIC_RELAXED);
}

static void add_ns(struct timespec *ts, int64_t ns) {
  int64_t sec = ns / 1000000000, rem = ns % 1000000000;
  ts->tv_sec += sec;
  ts->tv_nsec += rem;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_nsec -= 1000000000;
    ts->tv_sec++;
  } else if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000;
    ts->tv_sec--;
  }
}

/* --- slow disk ---------------------------------------------------------------------------- */

static void slow(int counter) {
  count(counter);
  int64_t us = load(F_SYNC_DELAY_US);
  if (us <= 0) return;
  count(C_DELAYED);
  struct timespec d = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&d, &d) != 0 && errno == EINTR) {
  }
}

int fsync(int fd) {
  int saved = errno;
  slow(C_FSYNC);
  errno = saved;
  return REAL(fsync)(fd);
}

int fdatasync(int fd) {
  int saved = errno;
  slow(C_FDATASYNC);
  errno = saved;
  return REAL(fdatasync)(fd);
}

int sync_file_range(int fd, off_t offset, off_t nbytes, unsigned int flags) {
  int saved = errno;
  /* Only a range write-out that waits is a sync; SYNC_FILE_RANGE_WRITE alone just starts it. */
  if (flags & (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER)) slow(C_SFR);
  else count(C_SFR);
  errno = saved;
  return REAL(sync_file_range)(fd, offset, nbytes, flags);
}

int msync(void *addr, size_t length, int flags) {
  int saved = errno;
  if (flags & MS_SYNC) slow(C_MSYNC);
  else count(C_MSYNC);
  errno = saved;
  return REAL(msync)(addr, length, flags);
}

int syncfs(int fd) {
  int saved = errno;
  slow(C_MSYNC);
  errno = saved;
  return REAL(syncfs)(fd);
}

/* --- clock jump --------------------------------------------------------------------------- */

static inline int is_realtime(clockid_t c) {
  return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  int rc = REAL(clock_gettime)(clk, ts);
  if (rc == 0 && is_realtime(clk)) {
    int64_t off = load(F_CLOCK_OFFSET_NS);
    if (off) add_ns(ts, off);
  }
  return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  int rc = REAL(gettimeofday)(tv, tz);
  int64_t off = load(F_CLOCK_OFFSET_NS);
  struct timeval *volatile t = tv; /* glibc declares it nonnull; Linux accepts NULL */
  if (rc == 0 && t && off) {
    struct timespec ts = {tv->tv_sec, tv->tv_usec * 1000};
    add_ns(&ts, off);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return rc;
}

time_t time(time_t *out) {
  struct timespec ts;
  REAL(clock_gettime)(CLOCK_REALTIME, &ts);
  int64_t off = load(F_CLOCK_OFFSET_NS);
  if (off) add_ns(&ts, off);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
  if (base != TIME_UTC) return 0;
  if (clock_gettime(CLOCK_REALTIME, ts) != 0) return 0;
  return base;
}

/* An absolute realtime deadline of the shifted clock, as the kernel's unshifted clock. */
static const struct timespec *unshift(const struct timespec *abs, struct timespec *buf) {
  int64_t off = load(F_CLOCK_OFFSET_NS);
  if (!off || !abs) return abs;
  *buf = *abs;
  add_ns(buf, -off);
  if (buf->tv_sec < 0) buf->tv_sec = buf->tv_nsec = 0;
  return buf;
}

/* glibc's __PTHREAD_COND_CLOCK_MONOTONIC_MASK in __wrefs: the condvar waits on CLOCK_MONOTONIC. */
static inline int cond_is_monotonic(pthread_cond_t *c) {
  return (__atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) & 2) != 0;
}

int pthread_cond_timedwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                           const struct timespec *restrict abs) {
  struct timespec buf;
  if (!cond_is_monotonic(c)) abs = unshift(abs, &buf);
  return REAL(cond_timedwait)(c, m, abs);
}

int pthread_cond_clockwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m, clockid_t clk,
                           const struct timespec *restrict abs) {
  struct timespec buf;
  if (clk == CLOCK_REALTIME) abs = unshift(abs, &buf);
  return REAL(cond_clockwait)(c, m, clk, abs);
}

int sem_timedwait(sem_t *restrict s, const struct timespec *restrict abs) {
  struct timespec buf;
  return REAL(sem_timedwait)(s, unshift(abs, &buf));
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem) {
  struct timespec buf;
  if ((flags & TIMER_ABSTIME) && is_realtime(clk)) req = unshift(req, &buf);
  return REAL(clock_nanosleep)(clk, flags, req, rem);
}
