/* glibc_floor.h — the hook loads into services built on older distributions.
 *
 * Included before everything else in each of the hook's files (build.mk:
 * -include). Linked against a new glibc, libfikit_hook.so would need that
 * glibc: 2.34 moved libdl and libpthread into libc and gave their functions
 * new symbol versions, 2.33 made fstat a real symbol, and a service whose
 * glibc is older (Ubuntu 20.04: 2.31, RHEL 8: 2.28) would fail to start
 * with the hook preloaded. Each reference below is bound to the oldest
 * version of the same function, which every later glibc still exports
 * (the same code), and build.mk keeps libdl.so.2 and libpthread.so.0 in
 * DT_NEEDED, where a glibc before 2.34 defines them. None of these is on
 * the launch path. tests/glibc_floor_test.go checks the newest version
 * the library needs and loads it under an older glibc.
 */
#ifndef FK_GLIBC_FLOOR_H
#define FK_GLIBC_FLOOR_H

#include <features.h> /* __GLIBC__ */
#if defined(__x86_64__) && defined(__GLIBC__)
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FK_OLDEST(sym, ver) __asm__(".symver " #sym "," #sym "@" #ver)
FK_OLDEST(dlopen, GLIBC_2.2.5);
FK_OLDEST(dlerror, GLIBC_2.2.5);
FK_OLDEST(dlvsym, GLIBC_2.2.5);
FK_OLDEST(pthread_create, GLIBC_2.2.5);
FK_OLDEST(pthread_key_create, GLIBC_2.2.5);
FK_OLDEST(pthread_once, GLIBC_2.2.5);
FK_OLDEST(pthread_setspecific, GLIBC_2.2.5);
FK_OLDEST(pthread_getspecific, GLIBC_2.2.5);
FK_OLDEST(pthread_sigmask, GLIBC_2.2.5);
FK_OLDEST(pthread_condattr_setclock, GLIBC_2.3.3);
#undef FK_OLDEST

/* Before 2.33 fstat was an inline call of __fxstat, so there is no older
 * fstat to bind to: ask the kernel, whose struct stat is glibc's on x86-64
 * (what glibc's own fstat did). */
static inline int fk_fstat(int fd, struct stat *st)
{
	return (int)syscall(SYS_fstat, fd, st);
}
#define fstat(fd, st) fk_fstat(fd, st)
#endif

#endif
