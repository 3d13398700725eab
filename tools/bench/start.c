/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-start: time from process start to a guest's first console byte (or to a given string
 * on its console), ours against QEMU.
 *
 *   bench-start [--runs N] [--warmup N] [--timeout-ms MS] [--name NAME] [--until STRING] \
 *       [--ours-newpid] --ours CMD [ARG...] --qemu CMD [ARG...]
 *
 * With --ours-newpid the --ours command starts as PID 1 of a pid namespace of its own (clone
 * with CLONE_NEWPID, then exec), as sandboxctl starts a jailed VMM.
 *
 * Each command is run directly (posix_spawnp, no shell) in a process group of its own, stdin
 * and stderr on /dev/null and stdout on a pipe. The time of a run is CLOCK_MONOTONIC from just
 * before the spawn to the arrival of the first byte on the pipe; the whole group is then
 * SIGKILLed and the command reaped. So a command must print nothing on stdout before its
 * guest does: for us `sandbox-vmm --payload payload-hello`, for QEMU `-serial stdio` with the
 * pvh-stub from tests/guests.
 *
 * With --until STRING (1 to 256 bytes) the run's time is instead taken at the read that
 * completes the first occurrence of STRING in the command's stdout, wherever the read()s split
 * it; output before it (a firmware or kernel log, say) is allowed. Only the last
 * strlen(STRING) - 1 bytes are kept for the match, and the last 4 KiB for diagnosis.
 *
 * The two commands alternate (ours, qemu, ours, ...) so that drifts in machine load hit both
 * alike; the first --warmup pairs (default 1) warm the page cache and are not counted. Per-run
 * lines go to stderr; stdout gets one line, NAME ([a-z0-9_]+) being `start` by default:
 *   NAME median_ms=<ours> qemu_microvm_median_ms=<qemu> ratio=<ours/qemu>
 * A run that prints nothing (or not STRING) within --timeout-ms (default 10000), or whose
 * command exits first, fails the benchmark: the reason goes to stderr, with the last lines
 * of the command's output under --until, and the exit status is 1. Usage errors exit with 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define BENCH_RUNS_DEFAULT	 20
#define BENCH_WARMUP_DEFAULT	 1
#define BENCH_TIMEOUT_MS_DEFAULT 10000
#define BENCH_COUNT_MAX		 10000
#define BENCH_NAME_DEFAULT	 "start"
#define BENCH_UNTIL_MAX		 256  /* longest --until STRING, in bytes */
#define BENCH_READ_LEN		 4096 /* bytes taken from the pipe per read() */
#define BENCH_RING_LEN		 4096 /* recent output kept to show when a run fails */
#define BENCH_SHOW_LINES	 20   /* lines of that output shown */
#define BENCH_EXIT_GRACE_MS	 100  /* how long a command that closed stdout may take to exit */

/* One command under test and what its runs measured. */
struct bench_cmd {
	const char *label; /* "ours" or "qemu" */
	char **argv;	   /* NULL-terminated, points into main()'s argv */
	double *run_ms;	   /* one entry per counted run */
	int nruns;	   /* entries filled in run_ms */
	int spawn_flags;   /* more BENCH_SPAWN_* (--ours-newpid: BENCH_SPAWN_NEWPID) */
};

/*
 * What one run's stdout looked like: the matcher for --until and the most recent output. All
 * of it is fixed-size, however much the command prints.
 */
struct bench_stream {
	const char *until;		/* the string that ends a run; NULL: any first byte */
	size_t until_len;		/* strlen(until), 1..BENCH_UNTIL_MAX */
	char tail[BENCH_UNTIL_MAX - 1]; /* the last until_len - 1 bytes read (fewer early) */
	size_t tail_len;		/* bytes in tail */
	char ring[BENCH_RING_LEN];	/* the last BENCH_RING_LEN bytes read, circularly */
	size_t ring_pos;		/* where the next byte goes in ring */
	uint64_t total_len;		/* bytes read in all */
};

/* How one run ended when it did not produce a byte (or --until's string) in time. */
struct bench_failure {
	int timed_out; /* no byte (or no match) before the deadline */
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

/* Empties st for a new run, matching until (NULL: the first byte) of until_len bytes. */
static void bench_stream_init(struct bench_stream *st, const char *until, size_t until_len)
{
	memset(st, 0, sizeof(*st));
	st->until = until;
	st->until_len = until_len;
}

/* Adds buf[0..len) to st's record of recent output. */
static void bench_stream_record(struct bench_stream *st, const char *buf, size_t len)
{
	st->total_len += len;
	if (len > BENCH_RING_LEN) {
		buf += len - BENCH_RING_LEN;
		len = BENCH_RING_LEN;
	}
	while (len) {
		size_t part = BENCH_RING_LEN - st->ring_pos;

		if (part > len)
			part = len;
		memcpy(st->ring + st->ring_pos, buf, part);
		st->ring_pos = (st->ring_pos + part) % BENCH_RING_LEN;
		buf += part;
		len -= part;
	}
}

/*
 * Feeds buf[0..len) (len <= BENCH_READ_LEN), just read, to st. Returns 1 when it completes
 * st->until (or, without one, when it holds any byte), else 0.
 */
static int bench_stream_feed(struct bench_stream *st, const char *buf, size_t len)
{
	char window[BENCH_UNTIL_MAX - 1 + BENCH_READ_LEN];
	size_t window_len, keep;

	bench_stream_record(st, buf, len);
	if (!st->until)
		return len > 0;

	/*
	 * An occurrence that began in an earlier read has at most until_len - 1 bytes there, all
	 * in tail; so searching tail + buf finds it, and finds each occurrence only once it is
	 * complete.
	 */
	memcpy(window, st->tail, st->tail_len);
	memcpy(window + st->tail_len, buf, len);
	window_len = st->tail_len + len;
	if (memmem(window, window_len, st->until, st->until_len))
		return 1;

	keep = st->until_len - 1;
	if (keep > window_len)
		keep = window_len;
	memcpy(st->tail, window + window_len - keep, keep);
	st->tail_len = keep;
	return 0;
}

/* Prints one line of a command's output to stderr, control bytes escaped, CRs dropped. */
static void bench_print_line(const char *line, size_t len)
{
	fputs("bench-start:   | ", stderr);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c == '\r')
			continue;
		if (c == '\t' || (c >= 0x20 && c < 0x7f))
			fputc(c, stderr);
		else
			fprintf(stderr, "\\x%02x", c);
	}
	fputc('\n', stderr);
}

/* Prints the last BENCH_SHOW_LINES lines of the output st recorded, to stderr. */
static void bench_stream_show(const struct bench_stream *st)
{
	char text[BENCH_RING_LEN];
	size_t len, start, end;
	int lines = 0;

	if (!st->total_len) {
		fprintf(stderr, "bench-start:   (no output at all)\n");
		return;
	}
	/* Unroll the ring: oldest byte first. */
	if (st->total_len < BENCH_RING_LEN) {
		len = (size_t)st->total_len;
		memcpy(text, st->ring, len);
	} else {
		len = BENCH_RING_LEN;
		memcpy(text, st->ring + st->ring_pos, len - st->ring_pos);
		memcpy(text + len - st->ring_pos, st->ring, st->ring_pos);
	}

	/* Back from the end (a final newline ends the last line, not starts another one). */
	end = len;
	if (text[end - 1] == '\n')
		end--;
	start = end;
	while (start > 0) {
		if (text[start - 1] == '\n' && ++lines == BENCH_SHOW_LINES)
			break;
		start--;
	}
	fprintf(stderr, "bench-start: its last output (%llu bytes in all)%s:\n",
		(unsigned long long)st->total_len,
		start == 0 && st->total_len > len ? ", the first line cut short" : "");
	while (start <= end) {
		const char *nl = memchr(text + start, '\n', end - start);
		size_t line_len = nl ? (size_t)(nl - (text + start)) : end - start;

		bench_print_line(text + start, line_len);
		start += line_len + 1;
	}
	if (end == len)
		fprintf(stderr, "bench-start:   (no newline at the end)\n");
}

/*
 * Reads fd into st until deadline_ns, until the first byte or st->until. Returns 0 when it
 * came, -ETIMEDOUT at the deadline, -EPIPE if the writer closed the pipe first, or another
 * -errno.
 */
__attribute__((warn_unused_result)) static int bench_wait_output(int fd, struct bench_stream *st,
								 int64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left_ns = deadline_ns - bench_now_ns();
		char buf[BENCH_READ_LEN];
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
		if (n > 0 && bench_stream_feed(st, buf, (size_t)n))
			return 0;
		if (n > 0)
			continue;
		if (n == 0)
			return -EPIPE;
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

/*
 * Kills pid's whole process group and reaps pid; *status gets its wait status. With
 * grace_ms, pid gets that long to exit by itself first, so that a command which closed its
 * stdout on the way out is reported with its own status rather than our SIGKILL.
 */
static void bench_reap(pid_t pid, int grace_ms, int *status)
{
	int64_t deadline_ns = bench_now_ns() + (int64_t)grace_ms * 1000000;
	const struct timespec tick = {.tv_nsec = 1000000};

	while (grace_ms > 0 && bench_now_ns() < deadline_ns) {
		if (waitpid(pid, status, WNOHANG) == pid) {
			/* pid stays the group's id while any member lives, so this is still it. */
			kill(-pid, SIGKILL);
			return;
		}
		nanosleep(&tick, NULL);
	}
	/* ESRCH (the group is gone already) is fine: waitpid still collects the zombie. */
	kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/*
 * Runs argv once and measures the time from spawn to its first byte on stdout (or to
 * st->until there) into *ms; st is reset first and afterwards holds the run's last output.
 * Returns 0, -ETIMEDOUT (nothing within timeout_ms), -EPIPE (exited first), or another
 * -errno; *fail says more about a failed run.
 */
__attribute__((warn_unused_result)) static int bench_run_once(char *const argv[], int spawn_flags,
							      int timeout_ms,
							      struct bench_stream *st, double *ms,
							      struct bench_failure *fail)
{
	int64_t start_ns, end_ns;
	int fds[2], ret;
	pid_t pid;

	memset(fail, 0, sizeof(*fail));
	bench_stream_init(st, st->until, st->until_len);
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;

	start_ns = bench_now_ns();
	/* a group of its own, so that one kill reaches whatever it starts (a `timeout`
	 * wrapper and its QEMU, say); stderr on /dev/null */
	ret = bench_spawn_cmd(argv, fds[1], BENCH_SPAWN_GROUP | BENCH_SPAWN_QUIET | spawn_flags,
			      &pid);
	close(fds[1]);
	if (ret) {
		fail->spawn_err = -ret;
		goto out;
	}

	ret = bench_wait_output(fds[0], st, start_ns + (int64_t)timeout_ms * 1000000);
	end_ns = bench_now_ns();
	bench_reap(pid, ret == -EPIPE ? BENCH_EXIT_GRACE_MS : 0, &fail->status);
	if (ret == 0)
		*ms = (double)(end_ns - start_ns) / 1e6;
	else if (ret == -ETIMEDOUT)
		fail->timed_out = 1;
out:
	close(fds[0]);
	return ret;
}

/*
 * Prints why cmd's run number `run` (< 1: a warmup run) failed, and under --until what the
 * command printed last; ret from bench_run_once, st the run's output.
 */
static void bench_report_failure(const struct bench_cmd *cmd, int run, int ret,
				 const struct bench_failure *fail, const struct bench_stream *st,
				 int timeout_ms)
{
	if (run < 1)
		fprintf(stderr, "bench-start: %s warmup (%s): ", cmd->label, cmd->argv[0]);
	else
		fprintf(stderr, "bench-start: %s run %d (%s): ", cmd->label, run, cmd->argv[0]);
	if (fail->spawn_err) {
		fprintf(stderr, "cannot start: %s\n", strerror(fail->spawn_err));
		return;
	}
	if (fail->timed_out && !st->until)
		fprintf(stderr, "no output within %d ms, killed\n", timeout_ms);
	else if (fail->timed_out)
		fprintf(stderr, "'%s' not seen within %d ms, killed\n", st->until, timeout_ms);
	else if (ret == -EPIPE && WIFEXITED(fail->status))
		fprintf(stderr, "exited with status %d before printing %s%s%s\n",
			WEXITSTATUS(fail->status), st->until ? "'" : "",
			st->until ? st->until : "anything", st->until ? "'" : "");
	else if (ret == -EPIPE && WIFSIGNALED(fail->status))
		fprintf(stderr, "killed by signal %d before printing %s%s%s\n",
			WTERMSIG(fail->status), st->until ? "'" : "",
			st->until ? st->until : "anything", st->until ? "'" : "");
	else
		fprintf(stderr, "%s\n", strerror(-ret));
	/* Without --until a failed run printed nothing, so there is nothing to show. */
	if (st->until)
		bench_stream_show(st);
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
		"usage: bench-start [--runs N] [--warmup N] [--timeout-ms MS] [--name NAME] \\\n"
		"           [--until STRING] [--ours-newpid] --ours CMD [ARG...] --qemu CMD "
		"[ARG...]\n"
		"  Times spawn-to-first-stdout-byte of each command, alternating, and prints\n"
		"  'NAME median_ms=... qemu_microvm_median_ms=... ratio=...'.\n"
		"  --runs N        counted runs per command (default %d)\n"
		"  --warmup N      uncounted runs per command first (default %d)\n"
		"  --timeout-ms MS a run without output by then fails (default %d)\n"
		"  --name NAME     first word of the result line, [a-z0-9_]+ (default %s)\n"
		"  --until STRING  time to the first STRING on stdout (1-%d bytes), not the\n"
		"                  first byte; a run that exits or times out first fails\n"
		"  The --ours command's arguments end at --qemu, and the other way round.\n",
		BENCH_RUNS_DEFAULT, BENCH_WARMUP_DEFAULT, BENCH_TIMEOUT_MS_DEFAULT,
		BENCH_NAME_DEFAULT, BENCH_UNTIL_MAX);
}

/* Returns whether name is a non-empty run of [a-z0-9_]. */
static int bench_name_ok(const char *name)
{
	if (!*name)
		return 0;
	for (; *name; name++)
		if (!((*name >= 'a' && *name <= 'z') || (*name >= '0' && *name <= '9') ||
		      *name == '_'))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	int runs = BENCH_RUNS_DEFAULT, warmup = BENCH_WARMUP_DEFAULT;
	int timeout_ms = BENCH_TIMEOUT_MS_DEFAULT;
	const char *name = BENCH_NAME_DEFAULT, *until = NULL;
	struct bench_stream *st;
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
		if (!strcmp(argv[i], "--ours-newpid")) {
			ours.spawn_flags |= BENCH_SPAWN_NEWPID;
			i--; /* no argument */
			continue;
		}
		if (!strcmp(argv[i], "--name") || !strcmp(argv[i], "--until")) {
			const char **str = !strcmp(argv[i], "--name") ? &name : &until;

			if (i + 1 >= argc) {
				fprintf(stderr, "bench-start: %s wants an argument\n", argv[i]);
				return 2;
			}
			*str = argv[i + 1];
			continue;
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
	if (!bench_name_ok(name)) {
		fprintf(stderr, "bench-start: --name '%s' is not [a-z0-9_]+\n", name);
		return 2;
	}
	if (until && (!*until || strlen(until) > BENCH_UNTIL_MAX)) {
		fprintf(stderr, "bench-start: --until wants 1 to %d bytes\n", BENCH_UNTIL_MAX);
		return 2;
	}

	/* One stream serves every run in turn; it is too big to want on the stack twice. */
	st = malloc(sizeof(*st));
	if (!st) {
		fprintf(stderr, "bench-start: out of memory\n");
		return 1;
	}
	bench_stream_init(st, until, until ? strlen(until) : 0);

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

			ret = bench_run_once(cmd->argv, cmd->spawn_flags, timeout_ms, st, &ms,
					     &fail);
			if (ret) {
				bench_report_failure(cmd, run, ret, &fail, st, timeout_ms);
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
	printf("%s median_ms=%.3f qemu_microvm_median_ms=%.3f ratio=%.3f\n", name, ours_ms, qemu_ms,
	       ours_ms / qemu_ms);
	free(st);
	free(ours.run_ms);
	free(qemu.run_ms);
	return 0;
}
