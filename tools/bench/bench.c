/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers bench.h describes. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

int64_t bench_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double bench_since_ms(int64_t start_ns)
{
	return (double)(bench_clock_ns() - start_ns) / 1e6;
}

/* BENCH_SPAWN_NEWPID: clone(CLONE_NEWPID) and exec, with the same fds, group and mask. */
static int spawn_newpid(char *const argv[], int out_fd, int flags, pid_t *pid)
{
	sigset_t none;
	pid_t child;

	fflush(NULL);
	child = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
	if (child < 0)
		return -errno;
	if (child == 0) {
		int null = open("/dev/null", O_RDWR);

		if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
		    dup2(out_fd >= 0 ? out_fd : null, STDOUT_FILENO) < 0 ||
		    ((flags & BENCH_SPAWN_QUIET) && dup2(null, STDERR_FILENO) < 0) ||
		    ((flags & BENCH_SPAWN_ERR_OUT) && dup2(STDOUT_FILENO, STDERR_FILENO) < 0))
			_exit(127);
		if ((flags & BENCH_SPAWN_GROUP) && setpgid(0, 0) < 0)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		_exit(127);
	}
	*pid = child;
	return 0;
}

int bench_spawn_cmd(char *const argv[], int out_fd, int flags, pid_t *pid)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	sigset_t none;
	int err;

	if (flags & BENCH_SPAWN_NEWPID)
		return spawn_newpid(argv, out_fd, flags, pid);
	if ((err = posix_spawn_file_actions_init(&actions)))
		return -err;
	if ((err = posix_spawnattr_init(&attr)))
		goto out_actions;
	/* dup2 clears O_CLOEXEC on the copy: the pipe's own ends stay closed in the child */
	err = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (!err && out_fd >= 0)
		err = posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
	else if (!err)
		err = posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
						       O_WRONLY, 0);
	if (!err && (flags & BENCH_SPAWN_QUIET))
		err = posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
						       O_WRONLY, 0);
	else if (!err && (flags & BENCH_SPAWN_ERR_OUT))
		err = posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
	sigemptyset(&none);
	if (!err)
		err = posix_spawnattr_setflags(
			&attr, POSIX_SPAWN_SETSIGMASK |
				       (flags & BENCH_SPAWN_GROUP ? POSIX_SPAWN_SETPGROUP : 0));
	if (!err)
		err = posix_spawnattr_setsigmask(&attr, &none);
	if (!err && (flags & BENCH_SPAWN_GROUP))
		err = posix_spawnattr_setpgroup(&attr, 0);
	if (!err)
		err = posix_spawnp(pid, argv[0], &actions, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
out_actions:
	posix_spawn_file_actions_destroy(&actions);
	return -err; /* posix_spawn and its helpers return a positive errno */
}

int bench_run(const char *what, char *const argv[], int out_fd)
{
	pid_t pid;
	int err, status;

	if ((err = bench_spawn_cmd(argv, out_fd, 0, &pid)) < 0) {
		fprintf(stderr, "bench: %s: cannot run %s\n", what, argv[0]);
		return err;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		fprintf(stderr, "bench: %s: %s exited with status %d\n", what, argv[0],
			WEXITSTATUS(status));
	else
		fprintf(stderr, "bench: %s: %s killed by signal %d\n", what, argv[0],
			WTERMSIG(status));
	return -ECHILD;
}

/* qsort comparison of doubles, ascending. */
static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_report(const char *label, double *v, int n)
{
	double median;

	if (n < 1)
		return 0;
	median = bench_median(v, n);
	fprintf(stderr, "bench: %s: min %.3f median %.3f p90 %.3f max %.3f ms over %d runs\n",
		label, v[0], median, v[(n * 9) / 10], v[n - 1], n);
	return median;
}

int bench_parse_count(const char *s, long min, long max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}
