/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The log crashfs (crashfs.c) keeps of every change made to the files under it, in the order
 * the changes were made, and crash-check (crash_check.c) replays: one record each, a header,
 * then name_len bytes of the file's name (relative to the mount, no NUL), then data_len bytes
 * (a write's data). Host byte order: the log never leaves the machine that wrote it.
 */
#ifndef SANDBOX_TESTS_CRASHLOG_H
#define SANDBOX_TESTS_CRASHLOG_H

#include <stdint.h>

enum crashlog_type {
	CRASHLOG_WRITE = 1,	/* off, len: the data */
	CRASHLOG_TRUNCATE = 2,	/* off: the new size */
	CRASHLOG_FALLOCATE = 3, /* mode, off, len */
	CRASHLOG_FSYNC = 4,	/* mode: 1 for fdatasync */
	CRASHLOG_MARK = 5,	/* off: the value written to /.mark (no file) */
	CRASHLOG_CREATE = 6,	/* a new, empty file */
};

struct crashlog_rec {
	uint32_t type; /* enum crashlog_type */
	uint32_t mode;
	uint64_t off;
	uint64_t len;
	uint32_t name_len;
	uint32_t data_len;
};
_Static_assert(sizeof(struct crashlog_rec) == 32, "no padding");

#define CRASHLOG_NAME_MAX 255
#define CRASHLOG_DATA_MAX (16u << 20)

#endif
