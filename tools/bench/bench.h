/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmarks share: the clock, spawning a command and waiting for it (bench-exec,
 * bench-create), the figures of a series of runs and their options (all, bench-start too).
 * Every function here either works or reports -errno; the benchmarks decide what a failure
 * means.
 */
#ifndef SANDBOX_TOOLS_BENCH_H
#define SANDBOX_TOOLS_BENCH_H

#include <stdint.h>
#include <sys/types.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t bench_clock_ns(void);

/* Milliseconds from start_ns to now. */
double bench_since_ms(int64_t start_ns);

/* bench_spawn_cmd's flags */
#define BENCH_SPAWN_GROUP   0x1 /* a process group of its own: one kill reaches all it starts */
#define BENCH_SPAWN_QUIET   0x2 /* stderr on /dev/null instead of ours */
#define BENCH_SPAWN_ERR_OUT 0x4 /* stderr where stdout goes (out_fd, a log file say) */
/* PID 1 of a pid namespace of its own, as sandboxctl starts a jailed VMM (clone with
 * CLONE_NEWPID, then exec), instead of posix_spawn */
#define BENCH_SPAWN_NEWPID  0x8

/*
 * Spawn argv (PATH searched) with stdin on /dev/null, stdout on out_fd (-1: /dev/null),
 * stderr inherited (BENCH_SPAWN_QUIET: /dev/null; BENCH_SPAWN_ERR_OUT: stdout's file) and an
 * empty signal mask whatever ours is.
 * Returns 0 with *pid set, or -errno.
 */
int bench_spawn_cmd(char *const argv[], int out_fd, int flags, pid_t *pid)
	__attribute__((warn_unused_result));

/*
 * Spawn argv as bench_spawn_cmd does (no group of its own) and wait for it. Returns 0 if it
 * exited 0, -ECHILD if it failed (the status goes to stderr with `what`), or -errno.
 */
int bench_run(const char *what, char *const argv[], int out_fd) __attribute__((warn_unused_result));

/* Sort v[0..n) and return its median (the mean of the middle two when n is even). */
double bench_median(double *v, int n);

/*
 * Sort v[0..n), print "bench: LABEL: min .. median .. p90 .. max .. ms over n runs" on stderr
 * and return the median (the mean of the middle two when n is even).
 */
double bench_report(const char *label, double *v, int n);

/* Parse a decimal count in [min, max] into *out. Returns 0, or -EINVAL. */
int bench_parse_count(const char *s, long min, long max, int *out)
	__attribute__((warn_unused_result));

#endif /* SANDBOX_TOOLS_BENCH_H */
