/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet udp: a UDP sink that logs each datagram and echoes it back (the "other UDP" a guest
 * must not get out with). fakenet get and fakenet connect-bench: the HTTP clients of
 * `tools/dev bench net` (tools/bench/net.sh), run on the host, in our guest and in QEMU's:
 * one GET's throughput, and the time to the first response byte of sequential connections.
 * No libraries needed beyond libc, so the static binary runs in any guest.
 */
#include "fakenet.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UDP_MAX	      65536
#define RECV_BUF      (256u << 10)
#define HEAD_MAX      16384
#define BENCH_MAX     100000 /* connect-bench --count */
#define STALL_DEFAULT 20

int udp_main(int argc, char **argv)
{
	struct fakenet_opts opts;
	static char buf[UDP_MAX];
	int fd;

	fakenet_opts_init(&opts);
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c == 0) {
			fakenet_err("udp: unknown argument: %s", argv[i]);
			return 2;
		}
	}
	if (!opts.have_listen) {
		fakenet_err("udp: needs --listen IP:PORT");
		return 2;
	}
	if (fakenet_start(&opts))
		return 1;
	fd = fakenet_listen(&opts, SOCK_DGRAM);
	if (fd < 0 || fakenet_write_pidfile(&opts))
		return 1;
	for (;;) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		char addr[32];
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&peer, &plen);

		if (n < 0) {
			if (errno == EINTR || errno == ECONNREFUSED)
				continue;
			fakenet_err("udp: recvfrom: %s", strerror(errno));
			return 1;
		}
		fakenet_format_addr(&peer, addr, sizeof(addr));
		fakenet_log("from %s len %zd", addr, n);
		sendto(fd, buf, n, MSG_DONTWAIT, (struct sockaddr *)&peer, plen);
	}
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait up to stall_sec for fd to be readable: 0, -ETIMEDOUT, or -errno. */
static int wait_readable(int fd, unsigned stall_sec)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	for (;;) {
		int n = poll(&p, 1, (int)stall_sec * 1000);

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* recv after waiting for data: bytes, 0 at EOF, -ETIMEDOUT after stall_sec without any. */
static ssize_t recv_stall(int fd, void *buf, size_t len, unsigned stall_sec)
{
	for (;;) {
		int w = wait_readable(fd, stall_sec);
		ssize_t n;

		if (w)
			return w;
		n = recv(fd, buf, len, 0);
		if (n >= 0)
			return n;
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * Connect to sa (connect bounded by stall_sec through SO_SNDTIMEO) and send a GET of path with
 * Host: host and Connection: close. The socket, or -errno.
 */
static int http_open(const struct sockaddr_in *sa, const char *host, const char *path,
		     unsigned stall_sec)
{
	char req[1024];
	int n, rc, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	fakenet_set_timeouts(fd, stall_sec);
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa))) {
		rc = errno == EINPROGRESS || errno == EAGAIN ? -ETIMEDOUT : -errno;
		close(fd);
		return rc;
	}
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
		     path, host);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		close(fd);
		return -ENAMETOOLONG;
	}
	rc = send_all(fd, req, n);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

struct http_resp {
	unsigned status;
	long long content_length; /* -1: none given */
	size_t head_len;	  /* bytes of head in the first buffer */
};

/*
 * Parse the response head in buf[0..len): 1 when complete (*r filled), 0 when more is needed,
 * -EPROTO when it is not HTTP.
 */
static int parse_head(const char *buf, size_t len, struct http_resp *r)
{
	const char *end = NULL, *p;

	for (size_t i = 3; i < len; i++) {
		if (!memcmp(buf + i - 3, "\r\n\r\n", 4)) {
			end = buf + i + 1;
			break;
		}
	}
	if (!end)
		return len >= HEAD_MAX ? -EPROTO : 0;
	if (len < 12 || memcmp(buf, "HTTP/1.", 7))
		return -EPROTO;
	r->status = strtoul(buf + 9, NULL, 10);
	r->content_length = -1;
	r->head_len = end - buf;
	for (p = memchr(buf, '\n', end - buf); p && p + 1 < end; p = memchr(p, '\n', end - p)) {
		p++;
		if ((size_t)(end - p) > 15 && !strncasecmp(p, "Content-Length:", 15))
			r->content_length = strtoll(p + 15, NULL, 10);
	}
	return 1;
}

/*
 * One GET to EOF: body bytes into *body, the time from connect() start to the first response
 * byte into *first_sec, to the last into *total_sec. 0 or -errno (a message printed).
 */
static int http_get(const struct sockaddr_in *sa, const char *host, const char *path,
		    unsigned stall_sec, char *buf, size_t bufsz, unsigned long long *body,
		    double *first_sec, double *total_sec)
{
	struct http_resp r = {0};
	size_t have = 0;
	bool got_head = false;
	double t0 = now_sec();
	int rc, fd = http_open(sa, host, path, stall_sec);

	*body = 0;
	*first_sec = 0;
	if (fd < 0) {
		fakenet_err("connect/send: %s", strerror(-fd));
		return fd;
	}
	for (;;) {
		ssize_t n = recv_stall(fd, got_head ? buf : buf + have,
				       got_head ? bufsz : bufsz - have, stall_sec);

		if (n == -ETIMEDOUT) {
			fakenet_err("stalled: no data for %u s after %llu body bytes", stall_sec,
				    *body);
			rc = n;
			goto out;
		}
		if (n < 0) {
			fakenet_err("recv: %s", strerror(-n));
			rc = n;
			goto out;
		}
		if (n == 0)
			break;
		if (*first_sec == 0)
			*first_sec = now_sec() - t0;
		if (got_head) {
			*body += n;
			continue;
		}
		have += n;
		rc = parse_head(buf, have, &r);
		if (rc < 0) {
			fakenet_err("not an HTTP response");
			goto out;
		}
		if (rc > 0) {
			got_head = true;
			*body = have - r.head_len;
		}
	}
	*total_sec = now_sec() - t0;
	rc = 0;
	if (!got_head) {
		fakenet_err("the connection closed before a response head (%zu bytes)", have);
		rc = -EPROTO;
	} else if (r.status != 200) {
		fakenet_err("HTTP status %u", r.status);
		rc = -EPROTO;
	} else if (r.content_length >= 0 && (unsigned long long)r.content_length != *body) {
		fakenet_err("short body: %llu of %lld bytes", *body, r.content_length);
		rc = -EPROTO;
	}
out:
	close(fd);
	return rc;
}

/* The options of get and connect-bench. */
struct client_args {
	struct fakenet_opts opts;
	const char *host, *path;
	unsigned stall_sec, count;
};

static int parse_uint(const char *opt, const char *val, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(val, &end, 10);

	if (*end || end == val || v == 0 || v > max) {
		fakenet_err("%s: not a number in 1-%u: %s", opt, max, val);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_client(int argc, char **argv, struct client_args *a)
{
	fakenet_opts_init(&a->opts);
	a->stall_sec = STALL_DEFAULT;
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &a->opts);

		if (c < 0)
			return -EINVAL;
		if (c > 0)
			continue;
		if (i + 1 >= argc) {
			fakenet_err("%s: unknown argument or missing value: %s", argv[0], argv[i]);
			return -EINVAL;
		}
		if (!strcmp(argv[i], "--host")) {
			a->host = argv[++i];
		} else if (!strcmp(argv[i], "--path")) {
			a->path = argv[++i];
		} else if (!strcmp(argv[i], "--stall")) {
			if (parse_uint("--stall", argv[++i], 86400, &a->stall_sec))
				return -EINVAL;
		} else if (!strcmp(argv[i], "--count")) {
			if (parse_uint("--count", argv[++i], BENCH_MAX, &a->count))
				return -EINVAL;
		} else {
			fakenet_err("%s: unknown argument: %s", argv[0], argv[i]);
			return -EINVAL;
		}
	}
	if (!a->opts.have_listen || !a->host) {
		fakenet_err("%s: needs --connect IP:PORT and --host NAME", argv[0]);
		return -EINVAL;
	}
	return 0;
}

int get_main(int argc, char **argv)
{
	struct client_args a = {0};
	unsigned long long body;
	double first, total;
	char *buf;
	int rc;

	if (parse_client(argc, argv, &a))
		return 2;
	if (!a.path || a.count) {
		fakenet_err("get: needs --path PATH (and no --count)");
		return 2;
	}
	buf = malloc(RECV_BUF);
	if (!buf)
		return 1;
	rc = http_get(&a.opts.listen, a.host, a.path, a.stall_sec, buf, RECV_BUF, &body, &first,
		      &total);
	free(buf);
	if (rc)
		return 1;
	printf("bytes=%llu seconds=%.3f MBps=%.1f\n", body, total,
	       total > 0 ? body / total / 1e6 : 0.0);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int connect_bench_main(int argc, char **argv)
{
	struct client_args a = {0};
	double *ms, median;
	unsigned n = 0, failed = 0;
	char *buf;

	if (parse_client(argc, argv, &a))
		return 2;
	if (!a.count || a.path) {
		fakenet_err("connect-bench: needs --count N (and no --path: it gets /bytes/1)");
		return 2;
	}
	ms = calloc(a.count, sizeof(*ms));
	buf = malloc(HEAD_MAX);
	if (!ms || !buf)
		return 1;
	for (unsigned i = 0; i < a.count; i++) {
		unsigned long long body;
		double first, total;

		if (http_get(&a.opts.listen, a.host, "/bytes/1", a.stall_sec, buf, HEAD_MAX, &body,
			     &first, &total)) {
			fakenet_err("connect-bench: connection %u of %u failed", i + 1, a.count);
			failed++;
			continue;
		}
		ms[n++] = first * 1e3;
	}
	free(buf);
	if (n == 0) {
		fakenet_err("connect-bench: every connection failed");
		free(ms);
		return 1;
	}
	qsort(ms, n, sizeof(*ms), cmp_double);
	median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
	printf("connect_ms median=%.3f min=%.3f max=%.3f n=%u\n", median, ms[0], ms[n - 1], n);
	free(ms);
	if (failed) {
		fakenet_err("connect-bench: %u of %u connections failed", failed, a.count);
		return 1;
	}
	return 0;
}
