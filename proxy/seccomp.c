/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running proxy's seccomp filter (docs/hardening.md "The proxy's jail"), built with
 * libseccomp once it is jailed, for every thread (installed before the first one starts, so
 * all inherit it). Anything not listed kills the whole process (SCMP_ACT_KILL_PROCESS; the
 * kernel logs the syscall number); SANDBOX_SECCOMP=log logs instead (debugging only).
 *
 * What it does then: accept the guest's connections, open its upstream ones (AF_INET and
 * AF_INET6 only), relay bytes (splice through a pipe for HTTP), answer DNS and ask the
 * resolver, append to the audit log and dns.map, rotate the audit log and rewrite
 * egress.left (open, rename and unlink inside its root, which holds only its own files),
 * hold connections in an epoll set until they say where they go, and start a thread per
 * decided connection (clone with CLONE_THREAD only). No execve, no fork, no
 * ptrace, no mount, no executable mapping.
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "proxy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Syscalls with no argument worth checking. */
static const int proxy_calls[] = {
	SCMP_SYS(read),		     /* sockets, pipes */
	SCMP_SYS(write),	     /* sockets, the audit log, dns.map, stderr */
	SCMP_SYS(readv),	     /* stdio */
	SCMP_SYS(writev),	     /* stdio, OpenSSL */
	SCMP_SYS(close),	     /* connections, files */
	SCMP_SYS(openat),	     /* egress.left's temporary file, the new audit.log, OpenSSL's
				      * lazy trust-store lookups (inside the root: nothing found) */
	SCMP_SYS(fstat),	     /* the audit log's size, stdio */
	SCMP_SYS(newfstatat),	     /* same */
	SCMP_SYS(statx),	     /* same */
	SCMP_SYS(lseek),	     /* stdio */
	SCMP_SYS(fchmod),	     /* egress.left's temporary file (write_file_atomic) */
	SCMP_SYS(fsync),	     /* egress.left and its directory */
	SCMP_SYS(fdatasync),	     /* same */
	SCMP_SYS(rename),	     /* egress.left appears whole; audit.log becomes audit.log.1 */
	SCMP_SYS(renameat),	     /* same */
	SCMP_SYS(renameat2),	     /* same */
	SCMP_SYS(unlink),	     /* a failed temporary file */
	SCMP_SYS(unlinkat),	     /* same */
	SCMP_SYS(fcntl),	     /* O_NONBLOCK on sockets, F_SETPIPE_SZ */
	SCMP_SYS(pipe2),	     /* the HTTP relay's splice pipe */
	SCMP_SYS(splice),	     /* the HTTP relay */
	SCMP_SYS(accept),	     /* the listeners */
	SCMP_SYS(accept4),	     /* same */
	SCMP_SYS(connect),	     /* upstream connections, the resolver */
	SCMP_SYS(bind),		     /* a socket's local address (the resolver's) */
	SCMP_SYS(recvfrom),	     /* sockets */
	SCMP_SYS(recvmsg),	     /* sockets */
	SCMP_SYS(recvmmsg),	     /* sockets */
	SCMP_SYS(sendto),	     /* sockets */
	SCMP_SYS(sendmsg),	     /* sockets */
	SCMP_SYS(sendmmsg),	     /* sockets */
	SCMP_SYS(shutdown),	     /* half-close */
	SCMP_SYS(getsockopt),	     /* SO_ORIGINAL_DST, SO_ERROR */
	SCMP_SYS(setsockopt),	     /* timeouts, TCP_NODELAY */
	SCMP_SYS(getsockname),	     /* addresses in the audit log */
	SCMP_SYS(getpeername),	     /* same */
	SCMP_SYS(poll),		     /* waits with a deadline */
	SCMP_SYS(ppoll),	     /* same */
	SCMP_SYS(epoll_wait),	     /* the waiting room (its set made before the jail) */
	SCMP_SYS(epoll_pwait),	     /* same (glibc may call either) */
	SCMP_SYS(epoll_ctl),	     /* same: a connection in and out of the set */
	SCMP_SYS(futex),	     /* mutexes, condition variables */
	SCMP_SYS(set_robust_list),   /* a new thread */
	SCMP_SYS(rseq),		     /* same */
	SCMP_SYS(munmap),	     /* free, a thread's stack */
	SCMP_SYS(mremap),	     /* realloc */
	SCMP_SYS(madvise),	     /* free's trim; a thread's exit frees its stack */
	SCMP_SYS(brk),		     /* malloc */
	SCMP_SYS(rt_sigprocmask),    /* pthread */
	SCMP_SYS(rt_sigaction),	     /* same */
	SCMP_SYS(rt_sigreturn),	     /* after a signal */
	SCMP_SYS(rt_sigtimedwait),   /* the main thread's SIGTERM, SIGINT */
	SCMP_SYS(clock_gettime),     /* when the vDSO cannot answer */
	SCMP_SYS(gettimeofday),	     /* same */
	SCMP_SYS(clock_nanosleep),   /* short waits (usleep) */
	SCMP_SYS(nanosleep),	     /* same */
	SCMP_SYS(sched_yield),	     /* spin waits */
	SCMP_SYS(sched_getaffinity), /* sysconf (malloc arenas, OpenSSL) */
	SCMP_SYS(getrandom),	     /* OpenSSL's RNG, DNS query ids */
	SCMP_SYS(getpid),	     /* egress.left's temporary name, tgkill */
	SCMP_SYS(gettid),	     /* tgkill */
	SCMP_SYS(tgkill),	     /* abort */
	SCMP_SYS(exit),		     /* a thread ends */
	SCMP_SYS(exit_group),	     /* the proxy ends */
	SCMP_SYS(restart_syscall),   /* after a signal */
};

static uint32_t seccomp_action(void)
{
	const char *e = getenv("SANDBOX_SECCOMP");

	return e && strcmp(e, "log") == 0 ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS;
}

static int seccomp_build(scmp_filter_ctx ctx)
{
	int err;

	for (size_t i = 0; i < ARRAY_SIZE(proxy_calls); i++)
		if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, proxy_calls[i], 0)) < 0)
			return err;
	/* Memory for malloc and thread stacks, never executable. */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				    SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				    SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0))) < 0)
		return err;
	/* Upstream connections and the resolver: IPv4 and IPv6 only (no AF_UNIX to the
	 * host's sockets, no netlink, no raw packets: the type is masked of its flags). */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				    SCMP_A0(SCMP_CMP_EQ, AF_INET),
				    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff, SOCK_STREAM))) < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				    SCMP_A0(SCMP_CMP_EQ, AF_INET),
				    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff, SOCK_DGRAM))) < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				    SCMP_A0(SCMP_CMP_EQ, AF_INET6),
				    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff, SOCK_STREAM))) < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				    SCMP_A0(SCMP_CMP_EQ, AF_INET6),
				    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff, SOCK_DGRAM))) < 0)
		return err;
	/* Threads (pthread_create), never a process: clone only with CLONE_THREAD. clone3's
	 * flags are in memory a filter cannot read: it fails with ENOSYS, and glibc falls back
	 * to clone. */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD))) < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		return err;
	return 0;
}

int proxy_seccomp_install(void)
{
	scmp_filter_ctx ctx = seccomp_init(seccomp_action());
	int err;

	if (!ctx)
		return -ENOMEM;
	err = seccomp_build(ctx);
	if (!err)
		err = seccomp_load(ctx);
	seccomp_release(ctx);
	return err;
}
