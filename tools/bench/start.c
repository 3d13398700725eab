/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-start: time from process start to a guest's first console byte, ours against QEMU.
 *
 *   bench-start [--runs N] [--warmup N] [--timeout-ms MS] \
 *       --ours CMD [ARG...] --qemu CMD [ARG...]
 *
 * Each command is run directly (posix_spawnp, no shell) in a process group of its own, stdin
 * and stderr on /dev/null and stdout on a pipe. The time of a run is CLOCK_MONOTONIC from just
 * before the spawn to the arrival of the first byte on the pipe; the whole group is then
 * SIGKILLed and the command reaped. So a command must print nothing on stdout before its
 * guest does: for us `sandbox-vmm --payload payload-hello`, for QEMU `-serial stdio` with the
 * pvh-stub from tests/guests.
 *
 * The two commands alternate (ours, qemu, ours, ...) so that drifts in machine load hit both
 * alike; the first --warmup pairs (default 1) warm the page cache and are not counted. Per-run
 * lines go to stderr; stdout gets one line:
 *   start median_ms=<ours> qemu_microvm_median_ms=<qemu> ratio=<ours/qemu>
 * A run that prints nothing within --timeout-ms (default 10000), or whose command exits
 * without printing, fails the benchmark: the reason goes to stderr and the exit status is 1.
 * Usage errors exit with 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define BENCH_RUNS_DEFAULT	 20
#define BENCH_WARMUP_DEFAULT	 1
#define BENCH_TIMEOUT_MS_DEFAULT 10000
#define BENCH_COUNT_MAX		 10000

/* One command under test and what its runs measured. */
struct bench_cmd {
	const char *label; /* "ours" or "qemu" */
	char **argv;	   /* NULL-terminated, points into main()'s argv */
	double *run_ms;	   /* one entry per counted run */
	int nruns;	   /* entries filled in run_ms */
};

/* How one run ended when it did not produce a byte in time. */
struct bench_failure {
	int timed_out; /* no byte before the deadline */
	int status;    /* wait status when the command exited (or was killed) */
	int spawn_err; /* errno of a failed spawn, else 0 */
};

/* Nanoseconds on CLOCK_MONOTONIC. */
static int64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Spawns argv in a process group of its own with stdout on out_fd and stdin/stderr on
 * /dev/null. Returns 0 with *pid set, or -errno.
 */
__attribute__((warn_unused_result)) static int bench_spawn(char *const argv[], int out_fd,
							   pid_t *pid)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	sigset_t none;
	int err;

	err = posix_spawn_file_actions_init(&actions);
	if (err)
		return -err;
	err = posix_spawnattr_init(&attr);
	if (err)
		goto out_actions;

	/* dup2 clears O_CLOEXEC on the copy; both pipe ends stay closed in the child. */
	err = posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
	if (!err)
		err = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
						       O_RDONLY, 0);
	if (!err)
		err = posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
						       O_WRONLY, 0);
	/*
	 * A group of its own, so that one kill reaches whatever the command starts (a `timeout`
	 * wrapper and its QEMU, say); an empty signal mask whatever ours is.
	 */
	sigemptyset(&none);
	if (!err)
		err = posix_spawnattr_setflags(&attr,
					       POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
	if (!err)
		err = posix_spawnattr_setpgroup(&attr, 0);
	if (!err)
		err = posix_spawnattr_setsigmask(&attr, &none);
	if (!err)
		err = posix_spawnp(pid, argv[0], &actions, &attr, argv, environ);

	posix_spawnattr_destroy(&attr);
out_actions:
	posix_spawn_file_actions_destroy(&actions);
	return -err; /* posix_spawn and its helpers return a positive errno */
}

/*
 * Waits until deadline_ns for the first byte on fd. Returns 0 when one arrived, -ETIMEDOUT
 * at the deadline, -EPIPE if the writer closed the pipe first, or another -errno.
 */
__attribute__((warn_unused_result)) static int bench_wait_byte(int fd, int64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left_ns = deadline_ns - bench_now_ns();
		char buf[256];
		ssize_t n;
		int ret;

		if (left_ns <= 0)
			return -ETIMEDOUT;
		/* Round up: a poll that wakes a little early just goes round again. */
		ret = poll(&pfd, 1, (int)((left_ns + 999999) / 1000000));
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0)
			return -errno;
		if (ret == 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n > 0)
			return 0;
		if (n == 0)
			return -EPIPE;
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

/* Kills pid's whole process group and reaps pid; *status gets its wait status. */
static void bench_reap(pid_t pid, int *status)
{
	/* ESRCH (the group is gone already) is fine: waitpid still collects the zombie. */
	kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/*
 * Runs argv once and measures the time from spawn to its first byte on stdout into *ms.
 * Returns 0, -ETIMEDOUT (no byte within timeout_ms), -EPIPE (exited without a byte), or
 * another -errno; *fail says more about a failed run.
 */
__attribute__((warn_unused_result)) static int
bench_run_once(char *const argv[], int timeout_ms, double *ms, struct bench_failure *fail)
{
	int64_t start_ns, end_ns;
	int fds[2], ret;
	pid_t pid;

	memset(fail, 0, sizeof(*fail));
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;

	start_ns = bench_now_ns();
	ret = bench_spawn(argv, fds[1], &pid);
	close(fds[1]);
	if (ret) {
		fail->spawn_err = -ret;
		goto out;
	}

	ret = bench_wait_byte(fds[0], start_ns + (int64_t)timeout_ms * 1000000);
	end_ns = bench_now_ns();
	bench_reap(pid, &fail->status);
	if (ret == 0)
		*ms = (double)(end_ns - start_ns) / 1e6;
	else if (ret == -ETIMEDOUT)
		fail->timed_out = 1;
out:
	close(fds[0]);
	return ret;
}

/* Prints why cmd's run number `run` (< 1: a warmup run) failed; ret from bench_run_once. */
static void bench_report_failure(const struct bench_cmd *cmd, int run, int ret,
				 const struct bench_failure *fail, int timeout_ms)
{
	if (run < 1)
		fprintf(stderr, "bench-start: %s warmup (%s): ", cmd->label, cmd->argv[0]);
	else
		fprintf(stderr, "bench-start: %s run %d (%s): ", cmd->label, run, cmd->argv[0]);
	if (fail->spawn_err)
		fprintf(stderr, "cannot start: %s\n", strerror(fail->spawn_err));
	else if (fail->timed_out)
		fprintf(stderr, "no output within %d ms, killed\n", timeout_ms);
	else if (ret == -EPIPE && WIFEXITED(fail->status))
		fprintf(stderr, "exited with status %d before printing anything\n",
			WEXITSTATUS(fail->status));
	else if (ret == -EPIPE && WIFSIGNALED(fail->status))
		fprintf(stderr, "killed by signal %d before printing anything\n",
			WTERMSIG(fail->status));
	else
		fprintf(stderr, "%s\n", strerror(-ret));
}

/* qsort comparison of doubles, ascending. */
static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns its median (the mean of the middle two when n is even). */
static double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Prints which KVM this machine has, since a figure means little without it. */
static void bench_print_host(void)
{
	static const char *const modules[] = {"kvm_intel", "kvm_amd", "kvm_pvm"};
	const char *flavour = "none";
	char path[64];

	for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
		snprintf(path, sizeof(path), "/sys/module/%s", modules[i]);
		if (access(path, F_OK) == 0) {
			flavour = modules[i];
			break;
		}
	}
	fprintf(stderr, "bench-start: host kvm=%s cpus=%ld\n", flavour,
		sysconf(_SC_NPROCESSORS_ONLN));
}

/* Prints the usage message to f. */
static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: bench-start [--runs N] [--warmup N] [--timeout-ms MS] \\\n"
		"           --ours CMD [ARG...] --qemu CMD [ARG...]\n"
		"  Times spawn-to-first-stdout-byte of each command, alternating, and prints\n"
		"  'start median_ms=... qemu_microvm_median_ms=... ratio=...'.\n"
		"  --runs N        counted runs per command (default %d)\n"
		"  --warmup N      uncounted runs per command first (default %d)\n"
		"  --timeout-ms MS a run without output by then fails (default %d)\n"
		"  The --ours command's arguments end at --qemu, and the other way round.\n",
		BENCH_RUNS_DEFAULT, BENCH_WARMUP_DEFAULT, BENCH_TIMEOUT_MS_DEFAULT);
}

/* Parses a decimal count in [min, max] into *val; returns 0 or -EINVAL. */
static int bench_parse_count(const char *s, long min, long max, int *val)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*val = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	int runs = BENCH_RUNS_DEFAULT, warmup = BENCH_WARMUP_DEFAULT;
	int timeout_ms = BENCH_TIMEOUT_MS_DEFAULT;
	struct bench_cmd ours = {.label = "ours"}, qemu = {.label = "qemu"};
	struct bench_cmd *cmds[2] = {&ours, &qemu};
	double ours_ms, qemu_ms;
	int i = 1;

	for (; i < argc; i += 2) {
		int *val;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			bench_usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--runs"))
			val = &runs;
		else if (!strcmp(argv[i], "--warmup"))
			val = &warmup;
		else if (!strcmp(argv[i], "--timeout-ms"))
			val = &timeout_ms;
		else
			break;
		if (i + 1 >= argc ||
		    bench_parse_count(argv[i + 1], val == &warmup ? 0 : 1,
				      val == &timeout_ms ? 3600000 : BENCH_COUNT_MAX, val)) {
			fprintf(stderr, "bench-start: %s wants a number in range\n", argv[i]);
			return 2;
		}
	}

	/*
	 * The rest is --ours CMD... and --qemu CMD..., in either order. Each marker is
	 * overwritten with NULL, which ends the previous command's argv; argv[argc] is NULL
	 * and ends the last one.
	 */
	for (struct bench_cmd *cur = NULL; i < argc; i++) {
		struct bench_cmd *next = !strcmp(argv[i], "--ours")   ? &ours
					 : !strcmp(argv[i], "--qemu") ? &qemu
								      : NULL;

		if (!next && !cur) {
			fprintf(stderr, "bench-start: unexpected argument '%s'\n", argv[i]);
			bench_usage(stderr);
			return 2;
		}
		if (!next)
			continue;
		if (next->argv) {
			fprintf(stderr, "bench-start: %s given twice\n", argv[i]);
			return 2;
		}
		argv[i] = NULL;
		next->argv = &argv[i + 1];
		cur = next;
	}
	if (!ours.argv || !qemu.argv || !ours.argv[0] || !qemu.argv[0]) {
		fprintf(stderr, "bench-start: both --ours and --qemu need a command\n");
		bench_usage(stderr);
		return 2;
	}

	for (int c = 0; c < 2; c++) {
		cmds[c]->run_ms = calloc((size_t)runs, sizeof(double));
		if (!cmds[c]->run_ms) {
			fprintf(stderr, "bench-start: out of memory\n");
			return 1;
		}
	}

	bench_print_host();
	for (int run = 1 - warmup; run <= runs; run++) {
		for (int c = 0; c < 2; c++) {
			struct bench_cmd *cmd = cmds[c];
			struct bench_failure fail;
			double ms = 0;
			int ret;

			ret = bench_run_once(cmd->argv, timeout_ms, &ms, &fail);
			if (ret) {
				bench_report_failure(cmd, run, ret, &fail, timeout_ms);
				return 1;
			}
			if (run < 1) {
				fprintf(stderr, "bench-start: %s warmup: %.3f ms\n", cmd->label,
					ms);
				continue;
			}
			fprintf(stderr, "bench-start: %s run %d/%d: %.3f ms\n", cmd->label, run,
				runs, ms);
			cmd->run_ms[cmd->nruns++] = ms;
		}
	}

	/* bench_median() sorts, so the first and last entries are then the min and max. */
	ours_ms = bench_median(ours.run_ms, ours.nruns);
	qemu_ms = bench_median(qemu.run_ms, qemu.nruns);
	for (int c = 0; c < 2; c++)
		fprintf(stderr, "bench-start: %s min %.3f median %.3f max %.3f ms over %d runs\n",
			cmds[c]->label, cmds[c]->run_ms[0], c ? qemu_ms : ours_ms,
			cmds[c]->run_ms[cmds[c]->nruns - 1], cmds[c]->nruns);
	printf("start median_ms=%.3f qemu_microvm_median_ms=%.3f ratio=%.3f\n", ours_ms, qemu_ms,
	       ours_ms / qemu_ms);
	free(ours.run_ms);
	free(qemu.run_ms);
	return 0;
}
