/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-snapshot-linux: snapshots of a real Linux guest through sandboxctl, each to the first
 * answered exec (tools/dev bench snapshot; docs/benchmarks.md). Run where Linux guests boot:
 * natively, or in the emulated KVM host, where only the ratio means much.
 *
 *   bench-snapshot-linux [--runs N] --ctl SANDBOXCTL [--image NAME] [--memory MiB]
 *
 * Set-up (not timed): a parent sandbox (`create`, which also leaves the image's ready
 * snapshot for these options) running, and `snapshot PARENT bench`. Then N rounds, each
 * timing four things on CLOCK_MONOTONIC from the spawn of the sandboxctl command to the exit
 * of `sandboxctl exec ID -- true` in the sandbox it made (the first command a user gets
 * through); each sandbox is removed afterwards, untimed:
 *   restore        `sandboxctl restore bench`
 *   fork1          `sandboxctl fork -n 1 PARENT` (the parent running)
 *   warm_create    `sandboxctl create` (restores the ready snapshot)
 *   cold_create    `sandboxctl create --cold` (boots)
 * Per-run lines on stderr; the last line on stdout:
 *   linux restore_ms=<m> fork1_ms=<m> warm_create_ms=<m> cold_create_ms=<m> ratio=<warm/cold>
 * Any failed run fails the benchmark (exit 1); usage errors exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define SL_RUNS_DEFAULT 10
#define SL_RUNS_MAX	100
#define SL_ID_LEN	64

struct sl_bench {
	char *ctl, *image, *memory;
	char parent[SL_ID_LEN];
};

/* Run argv, its stdout's first line into out (the id sandboxctl prints). 0 or -errno. */
static int sl_capture(char *const argv[], char *out, size_t cap)
{
	size_t have = 0;
	int fds[2], status, err;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	err = bench_spawn_cmd(argv, fds[1], 0, &pid);
	close(fds[1]);
	if (err < 0) {
		close(fds[0]);
		return err;
	}
	for (;;) {
		char sink[256];
		ssize_t n = read(fds[0], have < cap - 1 ? out + have : sink,
				 have < cap - 1 ? cap - 1 - have : sizeof(sink));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (have < cap - 1)
			have += (size_t)n;
	}
	out[have < cap ? have : cap - 1] = '\0';
	out[strcspn(out, "\n")] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out[0]) {
		fprintf(stderr, "bench-snapshot-linux: %s %s failed (status 0x%x)\n", argv[0],
			argv[1], status);
		return -ECHILD;
	}
	return 0;
}

/* One timed run: `argv` makes a sandbox, then exec true in it; its time in *ms. */
static int sl_run(const struct sl_bench *b, char *const argv[], double *ms)
{
	char id[SL_ID_LEN];
	char *exec_argv[] = {b->ctl, "exec", "--timeout", "60", id, "--", "true", NULL};
	char *rm_argv[] = {b->ctl, "rm", "-f", id, NULL};
	int64_t t0 = bench_clock_ns();
	int err = sl_capture(argv, id, sizeof(id));

	if (err < 0)
		return err;
	err = bench_run("exec", exec_argv, -1);
	*ms = bench_since_ms(t0);
	if (bench_run("rm", rm_argv, -1) < 0 && !err)
		err = -ECHILD;
	return err;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"ctl", required_argument, NULL, 'c'},
		{"image", required_argument, NULL, 'i'},
		{"memory", required_argument, NULL, 'm'},
		{NULL, 0, NULL, 0},
	};
	struct sl_bench b = {.image = "busybox", .memory = "256"};
	double restore[SL_RUNS_MAX], fork1[SL_RUNS_MAX], warm[SL_RUNS_MAX], cold[SL_RUNS_MAX];
	int runs = SL_RUNS_DEFAULT, c, err = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (bench_parse_count(optarg, 1, SL_RUNS_MAX, &runs) < 0)
				return 2;
			break;
		case 'c':
			b.ctl = optarg;
			break;
		case 'i':
			b.image = optarg;
			break;
		case 'm':
			b.memory = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!b.ctl || optind != argc) {
		fprintf(stderr, "usage: bench-snapshot-linux [--runs N] --ctl SANDBOXCTL [--image "
				"NAME] [--memory MiB]\n");
		return 2;
	}
	char *create_argv[] = {b.ctl, "create", "--image", b.image, "--memory", b.memory, NULL};
	char *cold_argv[] = {b.ctl,   "create",	  "--cold", "--image",
			     b.image, "--memory", b.memory, NULL};
	char *restore_argv[] = {b.ctl, "restore", "bench", NULL};
	char *fork_argv[] = {b.ctl, "fork", "-n", "1", b.parent, NULL};
	char *snap_argv[] = {b.ctl, "snapshot", b.parent, "bench", NULL};
	char *rm_argv[] = {b.ctl, "rm", "-f", b.parent, NULL};
	char *snap_rm_argv[] = {b.ctl, "snapshot", "rm", "bench", NULL};

	if (sl_capture(create_argv, b.parent, sizeof(b.parent)) < 0 ||
	    bench_run("snapshot", snap_argv, -1) < 0) {
		fprintf(stderr, "bench-snapshot-linux: the set-up failed\n");
		return 1;
	}
	for (int i = 0; i < runs && !err; i++) {
		if ((err = sl_run(&b, restore_argv, &restore[i])) < 0 ||
		    (err = sl_run(&b, fork_argv, &fork1[i])) < 0 ||
		    (err = sl_run(&b, create_argv, &warm[i])) < 0 ||
		    (err = sl_run(&b, cold_argv, &cold[i])) < 0)
			break;
		fprintf(stderr,
			"bench: run %d: restore %.1f ms, fork1 %.1f ms, warm create %.1f ms, cold "
			"create %.1f ms\n",
			i + 1, restore[i], fork1[i], warm[i], cold[i]);
	}
	if (bench_run("rm", rm_argv, -1) < 0 || bench_run("snapshot rm", snap_rm_argv, -1) < 0)
		fprintf(stderr, "bench-snapshot-linux: cleaning up failed\n");
	if (err < 0) {
		fprintf(stderr, "bench-snapshot-linux: a run failed: %s\n", strerror(-err));
		return 1;
	}
	double r = bench_report("restore", restore, runs), f = bench_report("fork1", fork1, runs),
	       w = bench_report("warm create", warm, runs),
	       k = bench_report("cold create", cold, runs);
	printf("linux restore_ms=%.2f fork1_ms=%.2f warm_create_ms=%.2f cold_create_ms=%.2f "
	       "ratio=%.3f\n",
	       r, f, w, k, w / k);
	return 0;
}
