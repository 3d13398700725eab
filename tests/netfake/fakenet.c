/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet: the command table, and what every service shares: addresses, the log, listeners,
 * the pidfile, signals, and the bounded thread-per-connection accept loop.
 */
#include "fakenet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int log_fd = 2;

struct command {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *usage;
};

static const struct command commands[] = {
	{"dns", dns_main,
	 "dns --listen IP:PORT --zone FILE [--log FILE] [--pidfile FILE]\n"
	 "    UDP DNS: A answers for the zone's names (TTL 60), NXDOMAIN for others,\n"
	 "    NOERROR and no answer for other types of zone names. Zone lines: NAME A IPV4.\n"
	 "    Logs \"NAME TYPE\" per query."},
	{"query", query_main,
	 "query --connect IP:PORT NAME [TYPE]\n"
	 "    One UDP DNS query (TYPE A by default); prints \"rcode=NAME\" and each A answer."},
	{"http", http_main,
	 "http --listen IP:PORT [--log FILE] [--pidfile FILE] [--timeout SEC]\n"
	 "    HTTP/1.1, keep-alive: GET /bytes/N (N bytes), /status/N (that status),\n"
	 "    anything else: the request head received as the body. POST bodies are read and\n"
	 "    their length appended (\"Body-Length: N\"). Logs each request's head."},
	{"https", https_main,
	 "https --listen IP:PORT --cert PEM --key PEM [--cert PEM --key PEM]... [--log FILE]\n"
	 "      [--pidfile FILE] [--timeout SEC]\n"
	 "    The same over TLS (ALPN http/1.1); the certificate is chosen by SNI among those\n"
	 "    given (the first when none matches)."},
	{"banner", banner_main,
	 "banner --listen IP:PORT --banner TEXT [--log FILE] [--pidfile FILE] [--timeout SEC]\n"
	 "    Server-first TCP: sends TEXT and a newline on accept, then echoes lines."},
	{"client", client_main,
	 "client --connect IP:PORT [--tls NAME --cacert PEM] [--send TEXT] [--timeout SEC]\n"
	 "    Connect (TLS verified against PEM, SNI and host name NAME), send TEXT (\\r \\n\n"
	 "    \\\\ escapes), copy what comes back to stdout until the peer closes."},
	{"udp", udp_main,
	 "udp --listen IP:PORT [--log FILE] [--pidfile FILE]\n"
	 "    UDP sink: logs \"from PEER len N\" per datagram and echoes it back."},
	{"get", get_main,
	 "get --connect IP:PORT --host NAME --path PATH [--stall SEC]\n"
	 "    One HTTP/1.1 GET (Connection: close), body discarded; prints\n"
	 "    \"bytes=N seconds=S MBps=X\" (body bytes, connect() to EOF, 10^6 bytes/s). Fails\n"
	 "    on a status other than 200, a short body, or no byte for SEC s (default 20)."},
	{"connect-bench", connect_bench_main,
	 "connect-bench --connect IP:PORT --host NAME --count N [--stall SEC]\n"
	 "    N sequential connections, each a GET /bytes/1 read to EOF; prints\n"
	 "    \"connect_ms median=X min=Y max=Z n=N\" (connect() start to the first response\n"
	 "    byte, CLOCK_MONOTONIC); exits 1 if any failed."},
	{"mkcert", mkcert_main,
	 "mkcert --ca-dir DIR --name NAME...\n"
	 "    A test CA (DIR/ca.pem, DIR/ca.key; kept if present) and for each NAME a server\n"
	 "    certificate DIR/NAME.pem + DIR/NAME.key it signs (SAN dNSName, or IP for IPv4)."},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: fakenet COMMAND [OPTIONS]\n"
		   "The fake internet of the network tests (tests/netfake/README.md).\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "fakenet %s\n", commands[i].usage);
}

void fakenet_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fakenet: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int fakenet_parse_addr(const char *text, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(text, ':');
	char *end;
	unsigned long port;

	if (!colon || (size_t)(colon - text) >= sizeof(host))
		return -EINVAL;
	memcpy(host, text, colon - text);
	host[colon - text] = 0;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port > 65535)
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

void fakenet_format_addr(const struct sockaddr_in *sa, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(sa->sin_port));
}

void fakenet_opts_init(struct fakenet_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->timeout_sec = FAKENET_IDLE_SEC;
}

int fakenet_parse_common(int argc, char **argv, int *i, struct fakenet_opts *opts)
{
	const char *opt = argv[*i];
	const char *val;

	if (strcmp(opt, "--listen") && strcmp(opt, "--connect") && strcmp(opt, "--log") &&
	    strcmp(opt, "--pidfile") && strcmp(opt, "--timeout"))
		return 0;
	if (*i + 1 >= argc) {
		fakenet_err("%s needs a value", opt);
		return -EINVAL;
	}
	val = argv[++*i];
	if (!strcmp(opt, "--listen") || !strcmp(opt, "--connect")) {
		if (fakenet_parse_addr(val, &opts->listen)) {
			fakenet_err("%s: not IPV4:PORT: %s", opt, val);
			return -EINVAL;
		}
		opts->have_listen = true;
	} else if (!strcmp(opt, "--log")) {
		opts->log_path = val;
	} else if (!strcmp(opt, "--pidfile")) {
		opts->pidfile_path = val;
	} else {
		char *end;
		unsigned long s = strtoul(val, &end, 10);

		if (*end || end == val || s == 0 || s > 86400) {
			fakenet_err("--timeout: not a number of seconds (1-86400): %s", val);
			return -EINVAL;
		}
		opts->timeout_sec = s;
	}
	return 1;
}

static void on_term(int sig)
{
	(void)sig;
	_exit(0);
}

int fakenet_start(const struct fakenet_opts *opts)
{
	struct sigaction sa = {.sa_handler = on_term};

	if (opts->log_path) {
		log_fd = open(opts->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			int e = -errno;

			fakenet_err("cannot open log %s: %s", opts->log_path, strerror(errno));
			log_fd = 2;
			return e;
		}
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

void fakenet_log_raw(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(log_fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= n;
	}
}

void fakenet_log(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	fakenet_log_raw(line, n);
}

int fakenet_listen(const struct fakenet_opts *opts, int type)
{
	int one = 1;
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	char addr[32];

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&opts->listen, sizeof(opts->listen)) ||
	    (type == SOCK_STREAM && listen(fd, 512))) {
		int e = -errno;

		fakenet_format_addr(&opts->listen, addr, sizeof(addr));
		fakenet_err("cannot listen on %s: %s", addr, strerror(-e));
		close(fd);
		return e;
	}
	return fd;
}

int fakenet_write_pidfile(const struct fakenet_opts *opts)
{
	char tmp[4096], buf[32];
	int fd, n;

	if (!opts->pidfile_path)
		return 0;
	/* Written whole, then renamed: a reader never sees an empty pidfile. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", opts->pidfile_path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, n) != n || close(fd) || rename(tmp, opts->pidfile_path)) {
		int e = -errno;

		unlink(tmp);
		return e;
	}
	return 0;
}

void fakenet_set_timeouts(int fd, unsigned sec)
{
	struct timeval tv = {.tv_sec = sec};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

struct conn_job {
	int fd;
	struct sockaddr_in peer;
	void (*serve)(int fd, const struct sockaddr_in *peer, void *arg);
	void *arg;
};

static atomic_int live_conns;

static void *conn_thread(void *p)
{
	struct conn_job job = *(struct conn_job *)p;

	free(p);
	job.serve(job.fd, &job.peer, job.arg);
	close(job.fd);
	atomic_fetch_sub(&live_conns, 1);
	return NULL;
}

int fakenet_accept_loop(int lfd, unsigned timeout_sec,
			void (*serve)(int fd, const struct sockaddr_in *peer, void *arg), void *arg)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		char addr[32];
		struct conn_job *job;
		pthread_t t;
		int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (errno != EINTR && errno != ECONNABORTED)
					usleep(10000);
				continue;
			}
			return -errno;
		}
		fakenet_format_addr(&peer, addr, sizeof(addr));
		if (atomic_fetch_add(&live_conns, 1) >= FAKENET_MAX_CONNS) {
			atomic_fetch_sub(&live_conns, 1);
			fakenet_log("refused %s: %d connections already", addr, FAKENET_MAX_CONNS);
			close(fd);
			continue;
		}
		fakenet_set_timeouts(fd, timeout_sec);
		job = malloc(sizeof(*job));
		if (!job) {
			atomic_fetch_sub(&live_conns, 1);
			close(fd);
			continue;
		}
		*job = (struct conn_job){.fd = fd, .peer = peer, .serve = serve, .arg = arg};
		if (pthread_create(&t, &attr, conn_thread, job)) {
			fakenet_log("refused %s: cannot start a thread", addr);
			free(job);
			atomic_fetch_sub(&live_conns, 1);
			close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		for (int j = 2; j < argc; j++) {
			if (!strcmp(argv[j], "-h") || !strcmp(argv[j], "--help")) {
				printf("usage: fakenet %s\n", commands[i].usage);
				return 0;
			}
		}
		return commands[i].main(argc - 1, argv + 1);
	}
	fakenet_err("unknown command: %s", argv[1]);
	usage(stderr);
	return 2;
}
