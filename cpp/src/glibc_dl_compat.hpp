// <dlfcn.h>, with dlopen/dlsym/dlerror/dlclose bound to their pre-2.34 glibc
// symbol versions.  Every translation unit that calls them includes this
// instead of <dlfcn.h>.
//
// glibc 2.34 moved them from libdl into libc under a new default version
// (GLIBC_2.34); linked as-is on a newer glibc, the core would need glibc 2.34
// and the wheel could only be tagged manylinux_2_34, refusing RHEL/Rocky 8,
// Ubuntu 20.04 and Debian 11.  The old versions are still exported by every
// later libc.so.6 (as compatibility symbols), and by libdl.so.2 on older
// systems, which CMakeLists.txt therefore links explicitly (libdl.so.2 still
// exists, empty, on glibc >= 2.34).  `auditwheel show` in .ci/run checks the
// resulting tag.
#ifndef DLPACKARRAY_GLIBC_DL_COMPAT_HPP_
#define DLPACKARRAY_GLIBC_DL_COMPAT_HPP_

#include <dlfcn.h>

#if defined(__linux__) && defined(__GLIBC__) && !defined(DLPACKARRAY_NO_DL_SYMVER)
#if defined(__x86_64__)
#define DLA_DL_OLD_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define DLA_DL_OLD_VERSION "GLIBC_2.17"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define DLA_DL_OLD_VERSION "GLIBC_2.17"
#endif
#ifdef DLA_DL_OLD_VERSION
__asm__(".symver dlopen,dlopen@" DLA_DL_OLD_VERSION);
__asm__(".symver dlsym,dlsym@" DLA_DL_OLD_VERSION);
__asm__(".symver dlerror,dlerror@" DLA_DL_OLD_VERSION);
__asm__(".symver dlclose,dlclose@" DLA_DL_OLD_VERSION);
#undef DLA_DL_OLD_VERSION
#endif
#endif

#endif  // DLPACKARRAY_GLIBC_DL_COMPAT_HPP_
