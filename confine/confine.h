/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Confinement steps shared by sandbox-vmm (vmm/jail.c) and sandbox-proxy (proxy/jail.c), the
 * two programs that drop root after opening what they need (docs/hardening.md). Each step
 * returns 0, or -errno with *step naming what failed, so each program words its own error.
 * Nothing here allocates or starts threads; the callers run these while single-threaded.
 */
#ifndef SANDBOX_CONFINE_H
#define SANDBOX_CONFINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Become PID 1 of a pid namespace of its own. Returns 0 in that process (at once if it is
 * PID 1 already: its launcher cloned it so). The parent left behind never returns: it drops
 * to uid/gid with no capabilities under a filter of the five calls it makes, forwards SIGTERM,
 * SIGINT and SIGHUP to the child and exits with the child's status (128 + signal if it was
 * killed). It fails closed: if it cannot drop its privileges or install that filter, it kills
 * the child and exits with `fail_status`, saying why on stderr after `prog`. -errno when the
 * namespace or the fork cannot be made. */
int confine_pid_namespace(uid_t uid, gid_t gid, int fail_status, const char *prog,
			  const char **step);

/* unshare(CLONE_NEWNS | `flags`), make every mount private, bind `root` (absolute,
 * canonical) onto itself nosuid,nodev,noexec and pivot into it: the old root is unmounted,
 * the cwd is the new /, nothing else is mounted. Then the uts namespace's hostname (`flags`
 * must hold CLONE_NEWUTS). */
int confine_root(const char *root, int flags, const char *hostname, const char **step);
/* The same into an empty, read-only tmpfs (mounted over /tmp in the new mount namespace):
 * for a program that needs no file at all. */
int confine_root_empty(int flags, const char *hostname, const char **step);

/* No core dumps, and these limits of fds, file size and processes. SIGXFSZ is ignored, so a
 * write past the file-size limit fails with EFBIG in the code that made it. */
int confine_limits(uint64_t nofile, uint64_t fsize, uint64_t nproc, const char **step);

/* Become uid/gid with no supplementary groups and no capabilities (bounding and ambient sets
 * emptied first, then checked with capget), no_new_privs, and not dumpable. */
int confine_drop_identity(uid_t uid, gid_t gid, const char **step);

#endif
