/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench-exec: the round trip of `exec -- true` in a running sandbox, beside a plain fork+exec
 * of `true` on this host (tools/dev bench exec; docs/benchmarks.md).
 *
 *   bench-exec [--runs N] [--warmup N] --socket VSOCK_SOCK [--ctl SANDBOXCTL --id ID]
 *
 * VSOCK_SOCK is the sandbox's $SANDBOX_HOME/sandboxes/ID/vsock.sock. Measured, N runs each
 * after N warmup runs (default 50 and 5), medians on stderr:
 *   host      fork + execve of `true` + waitpid, here (what the guest agent does per exec)
 *   spawn     posix_spawn of `true` + waitpid, here (glibc's vfork-like path), for reference
 *   conn      one EXEC of `true` on an agent connection open for the whole series: from the
 *             send of the EXEC frame to the arrival of its EXIT frame
 *   conn-sh   the same with `/bin/sh -c true`: conn with the start of a shell, which the
 *             service's execute always has
 *   session   one SESSION_EXEC of `true` (a command session, a new id each run, as sandboxd's
 *             execute asks: stdin open, kept for replay) to its EXIT on that connection: conn
 *             with the agent's session work, without sandboxd
 *   ping      PING to PONG on that connection: the vsock path's round trip, no process
 *   loop      one EXEC of `sh -c` running /bin/true 20 times in the guest: a twentieth of it
 *             is about the guest's own fork+exec, without the agent and vsock
 *   fresh     the same on a new connection each time: connect, CONNECT 52, HELLO, EXEC, EXIT
 *   process   a whole `sandboxctl exec ID -- true` process, spawn to reaped (with --ctl)
 * stdout gets one line: exec median_ms=<conn> host_fork_exec_ms=<host>.
 *
 * Why `conn` is the headline: a program driving a sandbox (an AI agent, a CI runner, the SDKs
 * this is for) keeps its agent connection open and issues calls on it, so what it waits for
 * per command is EXEC to EXIT; the guest's fork+exec is inside that and the host's fork+exec
 * is its natural floor. `process` adds what the sandboxctl command line costs on top (its own
 * start, the connect and HELLO), which is what a shell user sees; `fresh` splits that.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_exec.h"
#include "bench.h"
#include "client.h"
#include "proto.h"

#define EXEC_RUNS_DEFAULT   50
#define EXEC_WARMUP_DEFAULT 5
#define EXEC_RUNS_MAX	    10000
#define EXEC_TIMEOUT_MS	    BENCH_AGENT_TIMEOUT_MS

/* `sh -c true`: what an execute of `true` asks the guest (the API runs a command under a shell;
 * /bin/sh where there is no bash). */
static const char exec_sh_true_strings[] =
	"\0/bin/sh\0-c\0true\0PATH=/usr/sbin:/usr/bin:/sbin:/bin";

/*
 * A shell in the guest running /bin/true EXEC_LOOP_COUNT times: the guest's own fork+exec,
 * without the agent or vsock in each.
 */
#define EXEC_LOOP_COUNT 20
static const char exec_loop_strings[] =
	"\0sh\0-c\0for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; "
	"do /bin/true; done\0PATH=/usr/sbin:/usr/bin:/sbin:/bin";

/* One SESSION_EXEC of `true` under id "bench-session-PID-N" on c, until its EXIT (which must say
 * 0); the session is forgotten at once (ttl 0). */
static int exec_call_session(struct agent_conn *c, int n)
{
	static const char *const argv[] = {"true"}, *const env[] = {
							    "PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
	char id[48];
	struct session_req q = {
		.id = id,
		.argv = argv,
		.argc = 1,
		.env = env,
		.envc = 1,
		.uid = PROTO_ID_KEEP,
		.gid = PROTO_ID_KEEP,
		.timeout_ms = EXEC_TIMEOUT_MS,
		.idle_timeout_s = -1,
		.ttl_s = 0,
		.stdin = true,
	};
	uint8_t payload[512];
	struct proto_frame f;
	int len, err;

	snprintf(id, sizeof(id), "bench-session-%d-%d", (int)getpid(), n);
	if ((len = session_exec_payload(&q, payload, sizeof(payload))) < 0)
		return len;
	if ((err = agent_call(c, PROTO_MSG_SESSION_EXEC, payload, (uint32_t)len, EXEC_TIMEOUT_MS,
			      NULL, NULL, &f)) < 0)
		return err;
	if (f.hdr.type == PROTO_MSG_EXIT)
		return proto_get_le32(f.payload + offsetof(struct proto_exit, code)) ? -ECHILD : 0;
	return f.hdr.type == PROTO_MSG_ERROR ? -(int)proto_get_le32(f.payload) : -EPROTO;
}

/* One PING on c, until its PONG: the transport's round trip without a process. */
static int exec_call_ping(struct agent_conn *c)
{
	struct proto_frame f;
	int err;

	if ((err = agent_call(c, PROTO_MSG_PING, NULL, 0, EXEC_TIMEOUT_MS, NULL, NULL, &f)) < 0)
		return err;
	return f.hdr.type == PROTO_MSG_PONG ? 0 : -EPROTO;
}

/* fork + execve + waitpid of path, the way the agent runs a command (without its pipes). */
static int exec_host_fork(const char *path)
{
	char *const argv[] = {(char *)path, NULL};
	char *const envp[] = {NULL};
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execve(path, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

/* The absolute path of `true` on our PATH, as execve wants it. */
static int exec_find_true(char *out, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	snprintf(dirs, sizeof(dirs), "%s", path && *path ? path : "/usr/bin:/bin");
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save))
		if ((size_t)snprintf(out, len, "%s/true", d) < len && access(out, X_OK) == 0)
			return 0;
	return -ENOENT;
}

/* What one series measures: a label, and one run of it (0 or -errno) doing `per` things. */
struct exec_series {
	const char *label;
	int (*run)(void *ctx, int i);
	void *ctx;
	int per; /* the figures are per thing: a run's time divided by this */
};

/* The state the series' runs need. */
struct exec_bench {
	const char *sock_path, *ctl, *id;
	char true_path[4096];
	struct agent_conn conn; /* the connection `conn` keeps open */
};

static int exec_run_host(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	(void)i;
	return exec_host_fork(b->true_path);
}

static int exec_run_spawn(void *ctx, int i)
{
	struct exec_bench *b = ctx;
	char *const argv[] = {b->true_path, NULL};

	(void)i;
	return bench_run("spawn", argv, -1);
}

static int exec_run_conn(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	(void)i;
	return bench_agent_exec_true(&b->conn);
}

static int exec_run_conn_sh(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	(void)i;
	return bench_agent_exec(&b->conn, exec_sh_true_strings, sizeof(exec_sh_true_strings), 3);
}

static int exec_run_session(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	return exec_call_session(&b->conn, i + EXEC_RUNS_MAX); /* warm-up's i from -N */
}

static int exec_run_ping(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	(void)i;
	return exec_call_ping(&b->conn);
}

static int exec_run_loop(void *ctx, int i)
{
	struct exec_bench *b = ctx;

	(void)i;
	return bench_agent_exec(&b->conn, exec_loop_strings, sizeof(exec_loop_strings), 3);
}

static int exec_run_fresh(void *ctx, int i)
{
	struct exec_bench *b = ctx;
	struct agent_conn c;
	int err;

	(void)i;
	if ((err = agent_connect_path(b->sock_path, EXEC_TIMEOUT_MS, &c)) < 0)
		return err;
	err = bench_agent_exec_true(&c);
	agent_close(&c);
	return err;
}

static int exec_run_process(void *ctx, int i)
{
	struct exec_bench *b = ctx;
	char *const argv[] = {(char *)b->ctl, "exec", (char *)b->id, "--", "true", NULL};

	(void)i;
	return bench_run("process", argv, -1);
}

/* Run warmup + runs of s, timing the counted ones; returns the median in *median_ms. */
static int exec_series_run(const struct exec_series *s, int warmup, int runs, double *median_ms)
{
	double *ms = calloc((size_t)runs, sizeof(*ms));
	int err = 0;

	if (!ms)
		return -ENOMEM;
	for (int i = -warmup; i < runs; i++) {
		int64_t t0 = bench_clock_ns();

		if ((err = s->run(s->ctx, i)) < 0) {
			fprintf(stderr, "bench-exec: %s run %d failed: %s\n", s->label, i,
				strerror(-err));
			goto out;
		}
		if (i >= 0)
			ms[i] = bench_since_ms(t0) / s->per;
	}
	*median_ms = bench_report(s->label, ms, runs);
out:
	free(ms);
	return err;
}

static void exec_usage(FILE *f)
{
	fprintf(f,
		"usage: bench-exec [--runs N] [--warmup N] --socket VSOCK_SOCK\n"
		"                  [--ctl SANDBOXCTL --id ID]\n"
		"The round trip of `exec -- true` in a running sandbox (the sandbox's vsock.sock)\n"
		"beside fork+exec of `true` here; last line on stdout:\n"
		"  exec median_ms=<one EXEC on an open connection> host_fork_exec_ms=<..>\n");
}

int main(int argc, char **argv)
{
	struct exec_bench b = {.conn = {.fd = -1}};
	int runs = EXEC_RUNS_DEFAULT, warmup = EXEC_WARMUP_DEFAULT, err;
	double host_ms = 0, conn_ms = 0, other_ms;

	for (int i = 1; i < argc; i++) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			exec_usage(stdout);
			return 0;
		}
		if (!val)
			goto usage;
		err = 0;
		if (!strcmp(argv[i], "--runs"))
			err = bench_parse_count(val, 1, EXEC_RUNS_MAX, &runs);
		else if (!strcmp(argv[i], "--warmup"))
			err = bench_parse_count(val, 0, EXEC_RUNS_MAX, &warmup);
		else if (!strcmp(argv[i], "--socket"))
			b.sock_path = val;
		else if (!strcmp(argv[i], "--ctl"))
			b.ctl = val;
		else if (!strcmp(argv[i], "--id"))
			b.id = val;
		else
			goto usage;
		if (err < 0)
			goto usage;
		i++;
	}
	if (!b.sock_path || !b.ctl != !b.id)
		goto usage;
	if (exec_find_true(b.true_path, sizeof(b.true_path)) < 0) {
		fprintf(stderr, "bench-exec: no `true` on PATH\n");
		return 1;
	}
	if ((err = agent_connect_path(b.sock_path, EXEC_TIMEOUT_MS, &b.conn)) < 0) {
		fprintf(stderr, "bench-exec: cannot reach the agent through %s: %s\n", b.sock_path,
			strerror(-err));
		return 1;
	}
	/*
	 * The host's figure and ours first, one after the other in the same process and minute,
	 * so that machine load hits both alike; the references after them.
	 */
	const struct exec_series series[] = {
		{"host fork+execve+waitpid of true", exec_run_host, &b, 1},
		{"conn: EXEC to EXIT on an open agent connection", exec_run_conn, &b, 1},
		{"host posix_spawn+waitpid of true", exec_run_spawn, &b, 1},
		{"conn-sh: EXEC of sh -c true to EXIT on the open connection", exec_run_conn_sh, &b,
		 1},
		{"session: SESSION_EXEC to EXIT on the open connection", exec_run_session, &b, 1},
		{"ping: PING to PONG on the open connection", exec_run_ping, &b, 1},
		{"loop: per /bin/true of sh in the guest (an EXEC of 20, over 20)", exec_run_loop,
		 &b, EXEC_LOOP_COUNT},
		{"fresh: connect, CONNECT 52, HELLO, EXEC to EXIT", exec_run_fresh, &b, 1},
		{"process: a whole `sandboxctl exec ID -- true`", exec_run_process, &b, 1},
	};
	for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
		double *median = i == 0 ? &host_ms : i == 1 ? &conn_ms : &other_ms;

		if (series[i].run == exec_run_process && !b.ctl)
			continue;
		if (exec_series_run(&series[i], warmup, runs, median) < 0) {
			agent_close(&b.conn);
			return 1;
		}
	}
	agent_close(&b.conn);
	printf("exec median_ms=%.3f host_fork_exec_ms=%.3f\n", conn_ms, host_ms);
	return 0;
usage:
	exec_usage(stderr);
	return 2;
}
