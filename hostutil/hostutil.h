/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host programs' small helpers, one copy for the client library (sandboxctl, the
 * benchmarks), sandbox-proxy and sandbox-disk: the clock, whole writes, atomic files, bounded
 * reads, decimal numbers. Nothing here prints or exits: every failure is a -errno (or false)
 * for the caller to report. The VMM and the guest keep their own (they link none of this).
 */
#ifndef SANDBOX_HOSTUTIL_H
#define SANDBOX_HOSTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef __must_check
#define __must_check __attribute__((warn_unused_result))
#endif

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);

/* write() all of `len` bytes, retrying on EINTR and short writes (a blocking fd): 0 or
 * -errno. */
int write_all(int fd, const void *buf, size_t len) __must_check;

/* Write `len` bytes to `path` atomically with `mode`: a temporary file of a random name made
 * beside it with O_EXCL (a sandbox's directory is its jailed VMM's root, where a file of a name
 * it could guess may wait), fsync, rename, fsync of the directory. 0 or -errno; on failure
 * nothing is left but what `path` held before. */
int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode) __must_check;

/* A regular file of at most `max` bytes, read into a NUL-terminated malloc'ed buffer (*out;
 * its length in *len when len is not NULL): 0, -EFBIG when it is longer, -EINVAL when it is
 * not a regular file, or -errno. read_file never follows a link in the last component of
 * `path` (-ELOOP: files under $SANDBOX_HOME, which a guest-facing process may have made);
 * read_file_follow does (files a user names: /etc/resolv.conf, a credential's source). Files
 * that report no size (/proc) are read to their end, up to `max`. */
int read_file(const char *path, size_t max, char **out, size_t *len) __must_check;
int read_file_follow(const char *path, size_t max, char **out, size_t *len) __must_check;

/* A decimal number in [min, max] (digits only: no sign, no space, no base prefix), in *out;
 * false on anything else. */
bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
