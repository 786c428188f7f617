// Linux system headers that Swift's Glibc module does not export (epoll, eventfd, sendfile,
// splice, memfd). Only LarderIO imports this module; everything above it uses LarderIO's Swift types.
#ifndef CLARDER_SYSTEM_H
#define CLARDER_SYSTEM_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sched.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/// The number of CPUs this process may run on (sched_getaffinity), at least 1.
int larder_available_cpus(void);

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC (needs _GNU_SOURCE, which Swift's Glibc lacks).
int larder_accept4(int fd, struct sockaddr *address, socklen_t *length);

/// O_PATH (needs _GNU_SOURCE): a directory handle for the *at calls, no read access needed.
static const int larder_o_path = __O_PATH;

/// SIGRTMIN and SIGRTMAX (macros calling into glibc, which Swift cannot import).
int larder_sigrtmin(void);
int larder_sigrtmax(void);

/// dup3(2) with O_CLOEXEC (needs _GNU_SOURCE): `target` atomically refers to `source`'s file.
int larder_dup3_cloexec(int source, int target);

/// memfd_create(2) with MFD_CLOEXEC and MFD_ALLOW_SEALING (a GNU extension): an anonymous
/// file in memory.
int larder_memfd_create(const char *name);

/// fstatfs(2)'s f_type of the file system holding `fd` (TMPFS_MAGIC, EXT4_SUPER_MAGIC...),
/// in `magic`. -1 and errno on failure.
int larder_fs_magic(int fd, long *magic);

/// SIOCOUTQ: the bytes written to socket `fd` that its peer has not yet acknowledged (still in
/// the kernel's send queue), in `bytes`. -1 and errno on failure.
int larder_unsent_bytes(int fd, int *bytes);

/// Seals a memory file against any change of size or content (F_SEAL_SHRINK, F_SEAL_GROW,
/// F_SEAL_WRITE, F_SEAL_SEAL): a mapping of it can then never see its bytes change nor fault
/// past its end (SIGBUS). -1 and errno on failure.
int larder_seal_memfd(int fd);

/// mmap(2) of the first `length` bytes of `fd`, read-only and shared: the address, or -1
/// (MAP_FAILED) and errno.
intptr_t larder_map_shared_readonly(int fd, size_t length);

/// munmap(2) of what larder_map_shared_readonly mapped.
int larder_unmap(intptr_t address, size_t length);

/// preadv2(2) of one buffer with RWF_NOWAIT (a GNU extension): fails with EAGAIN, or reads
/// short, rather than wait for a disk; EOPNOTSUPP where the file system cannot tell.
ssize_t larder_pread_nowait(int fd, void *buffer, size_t count, off_t offset);

/// cachestat(2): how many of the pages holding bytes `offset..<offset + length` of `fd` are in
/// the page cache, in `cached`. -1 and errno (ENOSYS before Linux 6.5) when it cannot say.
int larder_cached_pages(int fd, uint64_t offset, uint64_t length, uint64_t *cached);

/// pthread_setname_np (a GNU extension).
int larder_set_thread_name(pthread_t thread, const char *name);

/// libFuzzer's driver, for the fuzz executable's own main (Fuzz/LarderFuzz). Defined only in
/// builds linked with -sanitize=fuzzer; referenced only there.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test_one_input)(const unsigned char *data, size_t size));

/// ThreadSanitizer's annotations (compiler-rt), for locks it cannot see (LarderIO's `Locked`).
/// Referenced only in builds made with -sanitize=thread and -D LARDER_TSAN.
void __tsan_acquire(void *address);
void __tsan_release(void *address);

#endif
