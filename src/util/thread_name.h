// Names the calling thread, so `top -H`, `ps -L`, gdb and perf show what each of the
// process's threads is (docs/OPERATIONS.md "Threads"). Linux keeps 15 characters.
#pragma once

#include <pthread.h>

namespace outbox::util {

inline void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace outbox::util
