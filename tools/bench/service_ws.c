/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service-ws: the C WebSocket client of the service benchmark (tools/bench/service.py,
 * tools/dev bench service; docs/benchmarks.md "The service").
 *
 *   service-ws exec --url D --key KEY [--runs N] [--warmup N] [--shell SH] [--command CMD]
 *                   [--conn VSOCK_SOCK]
 *   service-ws hold --key KEY --commands N --sockets M --url D [--url D...]
 *
 * D is a box's dataplane_url (http://HOST:PORT/dp/<id>); the socket is D/execute/ws.
 *
 * exec: N runs (default 20, after 3 warmup runs) of one command (default `true`, run by SH,
 * default /bin/bash: the frame the JS client sends) on an already-open WebSocket: the
 * upgrade is done before the clock starts; a run is the send of the execute frame to the
 * arrival of its exit frame (its `started` must come first, its exit code must be 0). Per-run
 * figures on stderr, then on stdout:
 *   exec_ws median_ms=<median>
 * With --conn (the box's vsock.sock), each run is paired with the anchor, bench-exec's `conn`:
 * one EXEC of `true` on an agent connection open for the whole series, send to EXIT, the two
 * taken in turn on the open WebSocket (the execute first in even runs, the anchor first in odd
 * ones, each after a 3 ms pause), so that both see the same moment of a noisy machine; the
 * line then ends ` conn_ms=<its median>`. Every run pauses so (pairs or not).
 *
 * hold: the idle WebSockets of the memory figure. First N commands `sleep 3600` in each box
 * (no timeout, no idle timeout, kept: they stay silent and running), each started on a
 * socket closed once it said `started`; stdout gets `commands started=<N x boxes>`. Then,
 * after a line on stdin, M sockets, the i-th attached by a `reconnect` frame to command
 * i mod (N x boxes), until every one has had its `started`: stdout gets
 * `attached sockets=<M>`. They are held, pings answered, until the next line on stdin (or
 * its end); then they are closed and stdout gets `closed lost=<sockets the server closed
 * meanwhile>`. Exit status 0 when nothing failed or was lost, 1 otherwise, 2 for usage.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent_exec.h"
#include "bench.h"
#include "service_wsconn.h"

#define SWS_RUNS_MAX	  10000
#define SWS_URLS_MAX	  64 /* boxes held in one run */
#define SWS_COMMANDS_MAX  64 /* per box: the guest agent keeps 64 sessions */
#define SWS_SOCKETS_MAX	  100000
#define SWS_MSG_MAX	  (1u << 20) /* a server message: sandboxd's own frame bound */
#define SWS_TIMEOUT_MS	  60000	     /* one upgrade, one send, one answer */
#define SWS_HOLD_IO_MS	  2000	     /* a held socket's frame, once poll says it is there */
#define SWS_ATTACH_WAIT_S 600	     /* every socket's `started` after the last upgrade */
#define SWS_CMD_LEN_MAX	  512

struct sws_opts {
	struct wsc_url urls[SWS_URLS_MAX];
	unsigned nurls;
	const char *key, *shell, *command, *conn;
	int runs, warmup, commands, sockets;
};

static char sws_msg[SWS_MSG_MAX];

/* Whether s goes into a JSON string as it is (no quote, backslash or control byte). */
static bool sws_json_plain(const char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
			return false;
	return true;
}

/* The `type` of a server message, compact JSON as sandboxd writes it. */
static bool sws_is(const char *msg, const char *type)
{
	char pat[48];

	snprintf(pat, sizeof(pat), "\"type\":\"%s\"", type);
	return strstr(msg, pat) != NULL;
}

/* Next message on fd, any error said once on stderr with what. */
static int sws_next(int fd, const char *what)
{
	size_t len;
	unsigned code = 0;
	int op = wsc_recv(fd, sws_msg, sizeof(sws_msg), &len, &code);

	if (op == -EPIPE)
		fprintf(stderr, "service-ws: %s: the server closed (code %u)\n", what, code);
	else if (op < 0)
		fprintf(stderr, "service-ws: %s: %s\n", what, strerror(-op));
	return op;
}

/* One run: upgrade (not timed), then execute to exit in *ms, execute to started in
 * *started_ms. */
/* The execute of run n on fd, an open WebSocket: its times to started and to exit. */
static int sws_exec_on(const struct sws_opts *o, int fd, unsigned n, double *ms, double *started_ms)
{
	char frame[1024];
	int err, len;
	int64_t t0;
	const char *code;

	len = snprintf(
		frame, sizeof(frame),
		"{\"type\":\"execute\",\"command\":\"%s\",\"timeout_seconds\":30,\"shell\":\"%s\","
		"\"idle_timeout_seconds\":300,\"kill_on_disconnect\":false,\"ttl_seconds\":600,"
		"\"close_stdin\":true,\"command_id\":\"svcbench-%d-%u\"}",
		o->command, o->shell, (int)getpid(), n);
	t0 = bench_clock_ns();
	if ((err = wsc_send(fd, WSC_OP_TEXT, frame, (size_t)len)) < 0)
		return err;
	if ((err = sws_next(fd, "exec")) < 0)
		return err;
	*started_ms = bench_since_ms(t0);
	if (!sws_is(sws_msg, "started")) {
		fprintf(stderr, "service-ws: exec: the first frame is not started: %.200s\n",
			sws_msg);
		return -EPROTO;
	}
	do {
		if ((err = sws_next(fd, "exec")) < 0)
			return err;
	} while (!sws_is(sws_msg, "exit") && !sws_is(sws_msg, "error"));
	*ms = bench_since_ms(t0);
	code = strstr(sws_msg, "\"exit_code\":");
	if (!code || strtol(code + 12, NULL, 10) != 0) {
		fprintf(stderr, "service-ws: exec: not an exit 0: %.200s\n", sws_msg);
		return -ECHILD;
	}
	return 0;
}

/* The anchor's call on c: its time, send to EXIT. */
static int sws_conn_once(struct agent_conn *c, double *ms)
{
	int64_t t0 = bench_clock_ns();
	int err = bench_agent_exec_true(c);

	*ms = bench_since_ms(t0);
	if (err < 0)
		fprintf(stderr, "service-ws: conn: EXEC of true: %s\n", strerror(-err));
	return err;
}

/* What a call before the next leaves running (a close's frames, a session's end in the
 * agent) is let finish first, so that neither of a pair pays for the other. */
#define SWS_SETTLE_US 3000

/*
 * Run n: a WebSocket opened (its upgrade unclocked), then its execute and, with c, the
 * anchor's call, in turn (ws_first: the execute first), the socket closed after both.
 */
static int sws_run(const struct sws_opts *o, struct agent_conn *c, bool ws_first, unsigned n,
		   double *ms, double *started_ms, double *conn_ms)
{
	int fd, err = 0;

	if ((err = wsc_open(&o->urls[0], "/execute/ws", o->key, SWS_TIMEOUT_MS, &fd)) < 0) {
		fprintf(stderr, "service-ws: upgrade: %s\n", strerror(-err));
		return err;
	}
	for (int turn = 0; turn < 2 && err == 0; turn++) {
		usleep(SWS_SETTLE_US);
		if (ws_first == (turn == 0))
			err = sws_exec_on(o, fd, n, ms, started_ms);
		else if (c)
			err = sws_conn_once(c, conn_ms);
	}
	wsc_close(fd);
	return err < 0 ? err : 0;
}

static int sws_exec(const struct sws_opts *o)
{
	double *v = calloc((size_t)o->runs, sizeof(double));
	double *started = calloc((size_t)o->runs, sizeof(double));
	double *conn = calloc((size_t)o->runs, sizeof(double));
	struct agent_conn c = {.fd = -1};
	int rc = 1, err;

	if (!v || !started || !conn)
		goto out;
	if (o->conn && (err = agent_connect_path(o->conn, BENCH_AGENT_TIMEOUT_MS, &c)) < 0) {
		fprintf(stderr, "service-ws: %s: %s\n", o->conn, strerror(-err));
		goto out;
	}
	for (int i = -o->warmup; i < o->runs; i++) {
		double ms = 0, sms = 0, cms = 0;

		if (sws_run(o, o->conn ? &c : NULL, (i & 1) == 0, (unsigned)(i + o->warmup), &ms,
			    &sms, &cms) < 0)
			goto out;
		if (i >= 0) {
			v[i] = ms;
			started[i] = sms;
			conn[i] = cms;
		}
	}
	bench_report("exec_ws: execute to started", started, o->runs);
	printf("exec_ws median_ms=%.3f",
	       bench_report("exec_ws: execute to exit on an open WebSocket", v, o->runs));
	if (o->conn)
		printf(" conn_ms=%.3f",
		       bench_report("conn: EXEC of true to EXIT on an open agent connection, "
				    "interleaved",
				    conn, o->runs));
	printf("\n");
	rc = 0;
out:
	if (c.fd >= 0)
		agent_close(&c);
	free(v);
	free(started);
	free(conn);
	return rc;
}

/* Start command c of box u: `sleep 3600`, silent, no deadline, kept; then detach. */
static int sws_start_command(const struct sws_opts *o, unsigned u, int c)
{
	char frame[512];
	int fd, err, len;

	if ((err = wsc_open(&o->urls[u], "/execute/ws", o->key, SWS_TIMEOUT_MS, &fd)) < 0) {
		fprintf(stderr, "service-ws: hold: upgrade: %s\n", strerror(-err));
		return err;
	}
	len = snprintf(
		frame, sizeof(frame),
		"{\"type\":\"execute\",\"command\":\"sleep 3600\",\"timeout_seconds\":0,"
		"\"shell\":\"/bin/sh\",\"idle_timeout_seconds\":-1,\"kill_on_disconnect\":false,"
		"\"ttl_seconds\":-1,\"close_stdin\":true,\"command_id\":\"hold-%u-%d\"}",
		u, c);
	if ((err = wsc_send(fd, WSC_OP_TEXT, frame, (size_t)len)) == 0 &&
	    (err = sws_next(fd, "hold: start")) >= 0 && !sws_is(sws_msg, "started")) {
		fprintf(stderr, "service-ws: hold: not started: %.200s\n", sws_msg);
		err = -EPROTO;
	}
	wsc_close(fd);
	return err < 0 ? err : 0;
}

/* Socket i attached to its command by a reconnect frame (its started is read later). */
static int sws_attach(const struct sws_opts *o, int i, int *fd)
{
	unsigned cmd = (unsigned)i % (o->nurls * (unsigned)o->commands);
	unsigned u = cmd / (unsigned)o->commands;
	char frame[256];
	int err, len;

	if ((err = wsc_open(&o->urls[u], "/execute/ws", o->key, SWS_TIMEOUT_MS, fd)) < 0) {
		fprintf(stderr, "service-ws: hold: upgrade of socket %d: %s\n", i, strerror(-err));
		return err;
	}
	len = snprintf(frame, sizeof(frame),
		       "{\"type\":\"reconnect\",\"command_id\":\"hold-%u-%u\",\"stdout_offset\":0,"
		       "\"stderr_offset\":0}",
		       u, cmd % (unsigned)o->commands);
	/* one socket that stalls mid-frame must not hold the others for long */
	if ((err = wsc_set_timeout(*fd, SWS_HOLD_IO_MS)) < 0 ||
	    (err = wsc_send(*fd, WSC_OP_TEXT, frame, (size_t)len)) < 0) {
		fprintf(stderr, "service-ws: hold: reconnect on socket %d: %s\n", i,
			strerror(-err));
		close(*fd);
	}
	return err;
}

/* A line on stdin (or its end). */
static void sws_wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		return;
}

/*
 * Read what the sockets have: each one's first message must be `started` (started[i] set);
 * after that only pings are expected (answered in wsc_recv). A socket the server closes is
 * counted in *lost and left out from then on (fd -1). Waits at most timeout_ms for anything.
 * Returns poll's count, or -errno.
 */
static int sws_poll(struct pollfd *pfd, int n, bool *started, int *nstarted, int *lost,
		    int timeout_ms)
{
	int ready = poll(pfd, (nfds_t)n, timeout_ms);

	if (ready < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n && ready; i++) {
		if (pfd[i].fd < 0 || !pfd[i].revents)
			continue;
		if (pfd[i].fd == STDIN_FILENO)
			continue;
		if (sws_next(pfd[i].fd, "hold") < 0) {
			close(pfd[i].fd);
			pfd[i].fd = -1;
			if (!(*lost)++)
				fprintf(stderr,
					"service-ws: hold: socket %d is the first lost (of %d)\n",
					i, n);
			continue;
		}
		if (!started[i] && sws_is(sws_msg, "started")) {
			started[i] = true;
			(*nstarted)++;
		}
	}
	return ready;
}

static void sws_raise_nofile(int sockets)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)sockets + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want;
	if (rl.rlim_max < want)
		rl.rlim_max = want; /* as root; else the attach fails with EMFILE, said plainly */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fprintf(stderr, "service-ws: hold: cannot raise the open files limit to %lu: %s\n",
			(unsigned long)want, strerror(errno));
}

static int sws_hold(const struct sws_opts *o)
{
	/* the sockets, then stdin last */
	struct pollfd *pfd = calloc((size_t)o->sockets + 1, sizeof(*pfd));
	bool *started = calloc((size_t)o->sockets + 1, sizeof(bool));
	int nstarted = 0, lost = 0, n = 0, rc = 1;
	int64_t deadline, t0;

	if (!pfd || !started)
		goto out;
	sws_raise_nofile(o->sockets);
	for (unsigned u = 0; u < o->nurls; u++)
		for (int c = 0; c < o->commands; c++)
			if (sws_start_command(o, u, c) < 0)
				goto out;
	printf("commands started=%u\n", o->nurls * (unsigned)o->commands);
	fflush(stdout);
	sws_wait_line();
	t0 = bench_clock_ns();
	for (; n < o->sockets; n++) {
		pfd[n].events = POLLIN;
		if (sws_attach(o, n, &pfd[n].fd) < 0)
			goto out;
		/* take what came meanwhile, so no socket's buffer holds much for long */
		if (n % 256 == 255 && sws_poll(pfd, n + 1, started, &nstarted, &lost, 0) < 0)
			goto out;
		if (n % 1000 == 999)
			fprintf(stderr,
				"service-ws: hold: %d sockets open, %d started, %d lost, %.1f s\n",
				n + 1, nstarted, lost, bench_since_ms(t0) / 1000);
	}
	deadline = bench_clock_ns() + (int64_t)SWS_ATTACH_WAIT_S * 1000000000;
	while (nstarted + lost < n && bench_clock_ns() < deadline)
		if (sws_poll(pfd, n, started, &nstarted, &lost, 1000) < 0)
			goto out;
	if (nstarted != n) {
		fprintf(stderr,
			"service-ws: hold: %d of %d sockets attached (%d closed by the server)\n",
			nstarted, n, lost);
		goto out;
	}
	printf("attached sockets=%d\n", n);
	fflush(stdout);
	pfd[n].fd = STDIN_FILENO;
	pfd[n].events = POLLIN;
	for (;;) {
		if (sws_poll(pfd, n + 1, started, &nstarted, &lost, -1) < 0)
			goto out;
		if (pfd[n].revents)
			break;
	}
	printf("closed lost=%d\n", lost);
	fflush(stdout);
	rc = lost ? 1 : 0;
out:
	for (int i = 0; pfd && i < n; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	free(pfd);
	free(started);
	return rc;
}

static void sws_usage(FILE *f)
{
	fprintf(f,
		"usage: service-ws exec --url D --key KEY [--runs N] [--warmup N] [--shell SH]\n"
		"                  [--command CMD] [--conn VSOCK_SOCK]\n"
		"       service-ws hold --key KEY --commands N --sockets M --url D [--url D...]\n"
		"D: a box's dataplane_url (http://HOST:PORT/dp/ID)\n");
}

int main(int argc, char **argv)
{
	static struct sws_opts o = {.shell = "/bin/bash",
				    .command = "true",
				    .runs = 20,
				    .warmup = 3,
				    .commands = 60,
				    .sockets = 10000};
	bool exec_mode;
	int err;

	if (argc < 2 || (strcmp(argv[1], "exec") && strcmp(argv[1], "hold"))) {
		sws_usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	exec_mode = !strcmp(argv[1], "exec");
	for (int i = 2; i < argc; i += 2) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val)
			goto usage;
		err = 0;
		if (!strcmp(opt, "--url")) {
			if (o.nurls >= SWS_URLS_MAX)
				goto usage;
			if ((err = wsc_parse_url(val, &o.urls[o.nurls++])) < 0) {
				fprintf(stderr, "service-ws: --url %s: %s\n", val, strerror(-err));
				return 2;
			}
		} else if (!strcmp(opt, "--key")) {
			o.key = val;
		} else if (!strcmp(opt, "--shell")) {
			o.shell = val;
		} else if (!strcmp(opt, "--command")) {
			o.command = val;
		} else if (!strcmp(opt, "--conn")) {
			o.conn = val;
		} else if (!strcmp(opt, "--runs")) {
			err = bench_parse_count(val, 1, SWS_RUNS_MAX, &o.runs);
		} else if (!strcmp(opt, "--warmup")) {
			err = bench_parse_count(val, 0, SWS_RUNS_MAX, &o.warmup);
		} else if (!strcmp(opt, "--commands")) {
			err = bench_parse_count(val, 1, SWS_COMMANDS_MAX, &o.commands);
		} else if (!strcmp(opt, "--sockets")) {
			err = bench_parse_count(val, 1, SWS_SOCKETS_MAX, &o.sockets);
		} else {
			goto usage;
		}
		if (err < 0)
			goto usage;
	}
	if (!o.key || !o.nurls || strlen(o.key) > 256 || !sws_json_plain(o.key) ||
	    strlen(o.command) > SWS_CMD_LEN_MAX || !sws_json_plain(o.command) ||
	    strlen(o.shell) > SWS_CMD_LEN_MAX || !sws_json_plain(o.shell) ||
	    (exec_mode && o.nurls != 1))
		goto usage;
	return exec_mode ? sws_exec(&o) : sws_hold(&o);
usage:
	sws_usage(stderr);
	return 2;
}
