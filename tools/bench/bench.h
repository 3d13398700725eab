/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the sandbox benchmarks (bench-exec, bench-create) share: the clock, spawning a command
 * and waiting for it, and the figures of a series of runs. Every function here either works or
 * reports -errno; the benchmarks decide what a failure means.
 */
#ifndef SANDBOX_TOOLS_BENCH_H
#define SANDBOX_TOOLS_BENCH_H

#include <stdint.h>
#include <sys/types.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t bench_clock_ns(void);

/* Milliseconds from start_ns to now. */
double bench_since_ms(int64_t start_ns);

/*
 * Spawn argv (PATH searched) with stdin on /dev/null, stdout on out_fd (-1: /dev/null) and
 * stderr inherited, in a process group of its own when new_group is set (so one kill reaches
 * whatever it starts). Returns 0 with *pid set, or -errno.
 */
int bench_spawn(char *const argv[], int out_fd, int new_group, pid_t *pid)
	__attribute__((warn_unused_result));

/*
 * Spawn argv as bench_spawn does (no group of its own) and wait for it. Returns 0 if it
 * exited 0, -ECHILD if it failed (the status goes to stderr with `what`), or -errno.
 */
int bench_run(const char *what, char *const argv[], int out_fd) __attribute__((warn_unused_result));

/*
 * Sort v[0..n), print "bench: LABEL: min .. median .. p90 .. max .. ms over n runs" on stderr
 * and return the median (the mean of the middle two when n is even).
 */
double bench_report(const char *label, double *v, int n);

/* Parse a decimal count in [min, max] into *out. Returns 0, or -EINVAL. */
int bench_parse_count(const char *s, int min, int max, int *out)
	__attribute__((warn_unused_result));

#endif /* SANDBOX_TOOLS_BENCH_H */
