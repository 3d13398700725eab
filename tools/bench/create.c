/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-create: the time from `sandboxctl create` to the first answered exec, beside QEMU
 * microvm booting the same kernel, initramfs and root image to sandbox-init's banner
 * (tools/dev bench create; docs/benchmarks.md).
 *
 *   bench-create [--runs N] [--warmup N] [--timeout-ms MS] --ctl SANDBOXCTL
 *       [--image NAME] [--memory MiB] --qemu CMD [ARG...]
 *
 * One run of ours, timed on CLOCK_MONOTONIC: spawn `sandboxctl create --image NAME --memory
 * MiB` (which prints the id once the agent answers), read the id, then run `sandboxctl exec ID
 * -- true` until it exits 0: that is the first command a user gets through. The sandbox is
 * then removed (`rm -f`, not timed). One run of QEMU: spawn CMD in a process group of its own
 * with stdout on a pipe, until `sandbox-init: ready` arrives there; the group is then
 * SIGKILLed. QEMU has no agent to answer (no vhost-vsock here), so its figure stops at the
 * banner the agent starts right after: a floor for the same work, flattering QEMU.
 *
 * The two alternate (ours, qemu, ours, ...) so that drifts in machine load hit both alike;
 * --warmup pairs (default 1) come first, uncounted. Per-run lines go to stderr; stdout gets
 *   create median_ms=<ours> qemu_microvm_boot_ms=<qemu> ratio=<ours/qemu>
 * Any failed run fails the benchmark (exit 1); usage errors exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define CREATE_RUNS_DEFAULT	  10
#define CREATE_WARMUP_DEFAULT	  1
#define CREATE_RUNS_MAX		  1000
#define CREATE_TIMEOUT_MS_DEFAULT 120000
#define CREATE_RUN_ALARM_S	  180 /* SIGALRM (the end) if one run of ours takes longer */
#define CREATE_BANNER		  "sandbox-init: ready"
#define CREATE_READ_LEN		  4096 /* bytes of QEMU's console taken per read() */

/* What the runs need. */
struct create_bench {
	char *ctl, *image, *memory;
	char **qemu_argv; /* NULL-terminated */
	int timeout_ms;
};

/* Read a child's stdout to its end into buf (NUL-terminated, the rest dropped). */
static void create_read_all(int fd, char *buf, size_t cap)
{
	size_t have = 0;
	char sink[256];

	for (;;) {
		char *dst = have < cap - 1 ? buf + have : sink;
		size_t room = have < cap - 1 ? cap - 1 - have : sizeof(sink);
		ssize_t n = read(fd, dst, room);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (dst == buf + have)
			have += (size_t)n;
	}
	buf[have] = '\0';
}

/*
 * One run of ours: create, then exec `true` in it; the time to that exit in *ms, and to the
 * end of `sandboxctl create` (the agent answered its ping) in *create_ms.
 */
static int create_run_ours(const struct create_bench *b, double *ms, double *create_ms)
{
	char *create_argv[] = {b->ctl, "create", "--image", b->image, "--memory", b->memory, NULL};
	char id[64];
	/* bounded: the agent kills it after 60 s, sandboxctl gives up on the agent 15 s later */
	char *exec_argv[] = {b->ctl, "exec", "--timeout", "60", id, "--", "true", NULL};
	char *rm_argv[] = {b->ctl, "rm", "-f", id, NULL};
	int fds[2], status, err;
	int64_t t0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	t0 = bench_clock_ns();
	err = bench_spawn_cmd(create_argv, fds[1], 0, &pid);
	close(fds[1]);
	if (err < 0) {
		close(fds[0]);
		return err;
	}
	create_read_all(fds[0], id, sizeof(id));
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	*create_ms = bench_since_ms(t0);
	id[strcspn(id, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !id[0]) {
		fprintf(stderr, "bench-create: sandboxctl create failed (status 0x%x)\n", status);
		return -ECHILD;
	}
	err = bench_run("exec", exec_argv, -1);
	*ms = bench_since_ms(t0);
	if (bench_run("rm", rm_argv, -1) < 0 && !err)
		err = -ECHILD;
	return err;
}

/*
 * Whether the output so far holds the banner: tail (*tail_len bytes, the end of the earlier
 * reads, at most strlen(banner) - 1 of them, so a banner split by reads is found) then the
 * new read buf[0..n), n at most CREATE_READ_LEN. Keeps the new tail.
 */
static int create_saw_banner(char *tail, size_t *tail_len, const char *buf, size_t n)
{
	const size_t keep = sizeof(CREATE_BANNER) - 2;
	char window[sizeof(CREATE_BANNER) - 2 + CREATE_READ_LEN];
	size_t wlen;

	memcpy(window, tail, *tail_len);
	memcpy(window + *tail_len, buf, n);
	wlen = *tail_len + n;
	if (memmem(window, wlen, CREATE_BANNER, sizeof(CREATE_BANNER) - 1))
		return 1;
	*tail_len = wlen < keep ? wlen : keep;
	memcpy(tail, window + wlen - *tail_len, *tail_len);
	return 0;
}

/* One run of QEMU: its spawn to the banner on its stdout, in *ms. */
static int create_run_qemu(const struct create_bench *b, double *ms)
{
	char tail[sizeof(CREATE_BANNER)], buf[CREATE_READ_LEN];
	size_t tail_len = 0;
	int fds[2], status, err = -ETIMEDOUT;
	int64_t t0, deadline_ns;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	t0 = bench_clock_ns();
	deadline_ns = t0 + (int64_t)b->timeout_ms * 1000000;
	err = bench_spawn_cmd(b->qemu_argv, fds[1], BENCH_SPAWN_GROUP, &pid);
	close(fds[1]);
	if (err < 0) {
		close(fds[0]);
		return err;
	}
	err = -ETIMEDOUT;
	for (;;) {
		int64_t left_ms = (deadline_ns - bench_clock_ns()) / 1000000;
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		ssize_t n;

		if (left_ms <= 0)
			break;
		if (poll(&pfd, 1, (int)left_ms) < 0 && errno != EINTR) {
			err = -errno;
			break;
		}
		n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			err = -ECHILD; /* QEMU ended before the banner */
			break;
		}
		if (create_saw_banner(tail, &tail_len, buf, (size_t)n)) {
			*ms = bench_since_ms(t0);
			err = 0;
			break;
		}
	}
	kill(-pid, SIGKILL);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (err < 0)
		fprintf(stderr, "bench-create: %s: no '%s' on its console (%s)\n", b->qemu_argv[0],
			CREATE_BANNER, strerror(-err));
	return err;
}

static void create_usage(FILE *f)
{
	fprintf(f,
		"usage: bench-create [--runs N] [--warmup N] [--timeout-ms MS] --ctl SANDBOXCTL\n"
		"                    [--image NAME] [--memory MiB] --qemu CMD [ARG...]\n"
		"Time from `sandboxctl create` to the first answered exec, beside CMD (QEMU)\n"
		"booting to '" CREATE_BANNER "'; last line on stdout:\n"
		"  create median_ms=<ours> qemu_microvm_boot_ms=<qemu> ratio=<ours/qemu>\n");
}

int main(int argc, char **argv)
{
	struct create_bench b = {
		.image = "busybox", .memory = "256", .timeout_ms = CREATE_TIMEOUT_MS_DEFAULT};
	int runs = CREATE_RUNS_DEFAULT, warmup = CREATE_WARMUP_DEFAULT, err;
	double *ours_ms, *qemu_ms, ours, qemu;

	for (int i = 1; i < argc; i++) {
		char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			create_usage(stdout);
			return 0;
		}
		if (!val)
			goto usage;
		err = 0;
		if (!strcmp(argv[i], "--qemu")) {
			b.qemu_argv = argv + i + 1;
			break;
		} else if (!strcmp(argv[i], "--runs")) {
			err = bench_parse_count(val, 1, CREATE_RUNS_MAX, &runs);
		} else if (!strcmp(argv[i], "--warmup")) {
			err = bench_parse_count(val, 0, CREATE_RUNS_MAX, &warmup);
		} else if (!strcmp(argv[i], "--timeout-ms")) {
			err = bench_parse_count(val, 1, 3600000, &b.timeout_ms);
		} else if (!strcmp(argv[i], "--ctl")) {
			b.ctl = val;
		} else if (!strcmp(argv[i], "--image")) {
			b.image = val;
		} else if (!strcmp(argv[i], "--memory")) {
			b.memory = val;
		} else {
			goto usage;
		}
		if (err < 0)
			goto usage;
		i++;
	}
	if (!b.ctl || !b.qemu_argv)
		goto usage;
	ours_ms = calloc((size_t)runs, sizeof(double));
	qemu_ms = calloc((size_t)runs, sizeof(double));
	if (!ours_ms || !qemu_ms)
		return 1;
	for (int i = -warmup; i < runs; i++) {
		double o = 0, q = 0, c = 0;

		/* a run that hangs (a VMM that never dies, say) ends the benchmark, not the day */
		alarm(CREATE_RUN_ALARM_S);
		err = create_run_ours(&b, &o, &c);
		alarm(0);
		if (err < 0) {
			fprintf(stderr, "bench-create: ours run %d failed: %s\n", i,
				strerror(-err));
			return 1;
		}
		if ((err = create_run_qemu(&b, &q)) < 0) {
			fprintf(stderr, "bench-create: qemu run %d failed\n", i);
			return 1;
		}
		fprintf(stderr,
			"bench-create: %s %d: ours %.3f ms (create %.3f + first exec %.3f), "
			"qemu %.3f ms\n",
			i < 0 ? "warmup" : "run", i < 0 ? -i : i + 1, o, c, o - c, q);
		if (i >= 0) {
			ours_ms[i] = o;
			qemu_ms[i] = q;
		}
	}
	ours = bench_report("ours: sandboxctl create + exec true", ours_ms, runs);
	qemu = bench_report("qemu microvm to " CREATE_BANNER, qemu_ms, runs);
	printf("create median_ms=%.3f qemu_microvm_boot_ms=%.3f ratio=%.3f\n", ours, qemu,
	       ours / qemu);
	free(ours_ms);
	free(qemu_ms);
	return 0;
usage:
	create_usage(stderr);
	return 2;
}
