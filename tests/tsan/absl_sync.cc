// Abseil's synchronization made visible to ThreadSanitizer, for the TSan build only
// (PODPROF_TSAN; never compiled into any other build).
//
// Debian's libabsl_synchronization.so is not built with -fsanitize=thread, so its
// Mutex::Lock and Unlock carry none of the __tsan_mutex_* annotations Abseil adds when it is:
// TSan sees no happens-before edge through an absl::Mutex and reports every guarded field
// touched by two threads as a race (docs/TESTING.md has the two-thread experiment). This file
// defines the exported entry points of absl::Mutex, CondVar, Notification and BlockingCounter in
// the test executable itself. The dynamic linker binds every call to them, from
// podprof, gRPC, and Abseil's own library alike, to these definitions first; each one makes
// the TSan annotation Abseil's own TSan build would make and calls the library's definition,
// found with dlsym(RTLD_NEXT). Races in podprof's code stay reported: only the lock, wait and
// notify operations themselves are annotated.
//
// ~Mutex is left alone: Abseil's TSan build marks it a write to the Mutex, but gRPC frees its
// objects (and their Mutexes) on reference counts TSan cannot see, so every such free would be
// reported as racing the last unlock. TSan forgets a Mutex when its memory is freed anyway.
//
// Abseil's entry points call one another through the PLT (LockWhenWithTimeout calls
// LockWhenWithDeadline, a Notification locks its Mutex), so a per-thread depth keeps the
// Mutex and CondVar annotations to the outermost call. Await and CondVar waits are annotated as
// exclusive-mode releases: podprof never waits while holding a reader lock.

#ifndef PODPROF_TSAN_ABSL_SYNC
#error "tests/tsan/absl_sync.cc belongs to the ThreadSanitizer build only (PODPROF_TSAN)"
#endif

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

#define PODPROF_STRINGIFY_INNER(x) #x
#define PODPROF_STRINGIFY(x) PODPROF_STRINGIFY_INNER(x)

// The library's definition of `absl::<inline namespace>::<suffix>`, e.g. suffix
// "5Mutex4LockEv" for absl::Mutex::Lock(). Aborts when the library lacks it: annotating
// nothing would bring the false reports back silently.
void* Real(const char* prefix, const char* suffix) {
  const std::string ns = PODPROF_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(prefix) + "4absl" + std::to_string(ns.size()) + ns + suffix;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tests/tsan/absl_sync.cc: %s not found in Abseil: %s\n", name.c_str(),
                 dlerror());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealFn(const char* suffix, const char* prefix = "_ZN") {
  return reinterpret_cast<Fn>(Real(prefix, suffix));
}

// How many annotated Mutex or CondVar entry points this thread is inside.
thread_local int depth = 0;

// Marks one entry point's call; outer() is true for the outermost one only.
class Nest {
 public:
  Nest() : outer_(depth++ == 0) {}
  ~Nest() { --depth; }
  Nest(const Nest&) = delete;
  Nest& operator=(const Nest&) = delete;
  bool outer() const { return outer_; }

 private:
  const bool outer_;
};

// Calls `real` as a lock of `mu` in `flags`' mode (0 or __tsan_mutex_read_lock), annotated.
template <typename Call>
auto Locking(const void* mu, unsigned flags, Call real) {
  Nest nest;
  void* m = const_cast<void*>(mu);
  if (nest.outer()) __tsan_mutex_pre_lock(m, flags);
  auto result = real();
  if (nest.outer()) __tsan_mutex_post_lock(m, flags, 0);
  return result;
}

// Calls `real`, which returns whether it took `mu`, as a try-lock of `mu`, annotated.
template <typename Call>
bool TryLocking(void* mu, unsigned flags, Call real) {
  Nest nest;
  flags |= __tsan_mutex_try_lock;
  if (nest.outer()) __tsan_mutex_pre_lock(mu, flags);
  const bool locked = real();
  if (nest.outer()) {
    __tsan_mutex_post_lock(mu, locked ? flags : flags | __tsan_mutex_try_lock_failed, 0);
  }
  return locked;
}

// Calls `real` as an unlock of `mu`, annotated.
template <typename Call>
void Unlocking(void* mu, unsigned flags, Call real) {
  Nest nest;
  if (nest.outer()) __tsan_mutex_pre_unlock(mu, flags);
  real();
  if (nest.outer()) __tsan_mutex_post_unlock(mu, flags);
}

// Calls `real`, which releases the held `mu`, waits and takes it back, annotated as an unlock
// followed by a lock.
template <typename Call>
auto Waiting(void* mu, Call real) {
  Nest nest;
  if (nest.outer()) __tsan_mutex_pre_unlock(mu, 0);
  auto result = real();
  if (nest.outer()) {
    __tsan_mutex_post_unlock(mu, 0);
    __tsan_mutex_pre_lock(mu, 0);
    __tsan_mutex_post_lock(mu, 0, 0);
  }
  return result;
}

// The flag a Notification sets in Notify() and its inline HasBeenNotified() acquire-loads: it
// follows the Notification's Mutex (absl/synchronization/notification.h).
void* NotifiedFlag(const absl::Notification* n) {
  static_assert(sizeof(absl::Notification) == 2 * sizeof(absl::Mutex),
                "absl::Notification is no longer { Mutex mutex_; atomic<bool> notified_yet_; }");
  return const_cast<char*>(reinterpret_cast<const char*>(n) + sizeof(absl::Mutex));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using Bool = bool (*)(Mutex*);
using Void = void (*)(Mutex*);
using Cond = bool (*)(Mutex*, const Condition&);
using CondFor = bool (*)(Mutex*, const Condition&, Duration);
using CondUntil = bool (*)(Mutex*, const Condition&, Time);

void Mutex::Lock() {
  static const auto real = RealFn<Void>("5Mutex4LockEv");
  Locking(this, 0, [&] { return (real(this), 0); });
}

void Mutex::ReaderLock() {
  static const auto real = RealFn<Void>("5Mutex10ReaderLockEv");
  Locking(this, __tsan_mutex_read_lock, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  static const auto real = RealFn<Bool>("5Mutex7TryLockEv");
  return TryLocking(this, 0, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  static const auto real = RealFn<Bool>("5Mutex13ReaderTryLockEv");
  return TryLocking(this, __tsan_mutex_read_lock, [&] { return real(this); });
}

void Mutex::Unlock() {
  static const auto real = RealFn<Void>("5Mutex6UnlockEv");
  Unlocking(this, 0, [&] { real(this); });
}

void Mutex::ReaderUnlock() {
  static const auto real = RealFn<Void>("5Mutex12ReaderUnlockEv");
  Unlocking(this, __tsan_mutex_read_lock, [&] { real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = RealFn<Cond>("5Mutex8LockWhenERKNS0_9ConditionE");
  Locking(this, 0, [&] { return real(this, cond); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = RealFn<Cond>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      RealFn<CondFor>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      RealFn<CondFor>("5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      RealFn<CondUntil>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      RealFn<CondUntil>("5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, __tsan_mutex_read_lock, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  static const auto real = RealFn<Cond>("5Mutex5AwaitERKNS0_9ConditionE");
  Waiting(this, [&] { return real(this, cond); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real =
      RealFn<CondFor>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Waiting(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      RealFn<CondUntil>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Waiting(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  using Fn = void (*)(CondVar*, Mutex*);
  static const auto real = RealFn<Fn>("7CondVar4WaitEPNS0_5MutexE");
  Waiting(mu, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  using Fn = bool (*)(CondVar*, Mutex*, Duration);
  static const auto real = RealFn<Fn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return Waiting(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  using Fn = bool (*)(CondVar*, Mutex*, Time);
  static const auto real = RealFn<Fn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Waiting(mu, [&] { return real(this, mu, deadline); });
}

// Notify publishes everything before it to whoever sees the notification, on the slow path
// (through the Mutex, annotated above) and on the fast path (the inline acquire-load of the
// flag, which TSan sees but whose store in the library it does not).
void Notification::Notify() {
  using Fn = void (*)(Notification*);
  static const auto real = RealFn<Fn>("12Notification6NotifyEv");
  __tsan_release(NotifiedFlag(this));
  real(this);
}

void Notification::WaitForNotification() const {
  using Fn = void (*)(const Notification*);
  static const auto real = RealFn<Fn>("12Notification19WaitForNotificationEv", "_ZNK");
  real(this);
  __tsan_acquire(NotifiedFlag(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  using Fn = bool (*)(const Notification*, Duration);
  static const auto real =
      RealFn<Fn>("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", "_ZNK");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(NotifiedFlag(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  using Fn = bool (*)(const Notification*, Time);
  static const auto real =
      RealFn<Fn>("12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", "_ZNK");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(NotifiedFlag(this));
  return notified;
}

// Each decrement publishes what its thread did before it to the thread that Wait()s; only the
// last one goes through the Mutex.
bool BlockingCounter::DecrementCount() {
  using Fn = bool (*)(BlockingCounter*);
  static const auto real = RealFn<Fn>("15BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  using Fn = void (*)(BlockingCounter*);
  static const auto real = RealFn<Fn>("15BlockingCounter4WaitEv");
  real(this);
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
