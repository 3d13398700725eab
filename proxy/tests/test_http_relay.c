/* SPDX-License-Identifier: Apache-2.0 */
/* http_relay: every request on a plain HTTP connection must name the host decided on. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

struct relay_run {
	int g, u;
	const char *pre;
	int err;
	const char *why;
	uint64_t up, down;
};

static void *run_relay(void *arg)
{
	struct relay_run *r = arg;

	r->err = http_relay(r->g, r->u, r->pre, strlen(r->pre), "allowed.test", 2000, NULL, &r->up,
			    &r->down, &r->why);
	return NULL;
}

static char answer[4096]; /* what the guest got back in the last relay_case */

/* Send `guest` (after the first request in `pre`), close the guest's write side, and return
 * what upstream received (upstream answers nothing and closes at the guest's EOF). */
static char *relay_case(const char *pre, const char *guest, struct relay_run *r)
{
	int gp[2], up[2];
	static char got[8192];
	size_t n = 0, a = 0;
	ssize_t k;
	pthread_t t;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, gp), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, up), 0);
	*r = (struct relay_run){.g = gp[1], .u = up[1], .pre = pre};
	cr_assert_eq(pthread_create(&t, NULL, run_relay, r), 0);
	if (*guest)
		cr_assert_eq(write(gp[0], guest, strlen(guest)), (ssize_t)strlen(guest));
	shutdown(gp[0], SHUT_WR);
	while ((k = read(up[0], got + n, sizeof(got) - 1 - n)) > 0)
		n += (size_t)k;
	got[n] = 0;
	close(up[0]);
	pthread_join(t, NULL);
	while ((k = recv(gp[0], answer + a, sizeof(answer) - 1 - a, MSG_DONTWAIT)) > 0)
		a += (size_t)k;
	answer[a] = 0;
	close(gp[0]);
	close(gp[1]);
	close(up[1]);
	return got;
}

Test(http_relay, keep_alive_same_host)
{
	struct relay_run r;
	char *got = relay_case(
		"GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"POST /b HTTP/1.1\r\nHost: ALLOWED.test.\r\nContent-Length: 3\r\n\r\nxyz", &r);

	cr_assert_eq(r.err, 0, "%d %s", r.err, r.why ? r.why : "");
	cr_assert(strstr(got, "GET /a") && strstr(got, "POST /b") && strstr(got, "\r\n\r\nxyz"),
		  "%s", got);
}

Test(http_relay, second_host_refused)
{
	struct relay_run r;
	char *got = relay_case("GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			       "GET /b HTTP/1.1\r\nHost: denied.test\r\n\r\n", &r);

	cr_assert_eq(r.err, -EACCES);
	cr_assert(strstr(got, "GET /a"), "%s", got);
	cr_assert_null(strstr(got, "denied"), "%s", got);
}

Test(http_relay, body_cannot_hide_a_request)
{
	struct relay_run r;
	/* The body is framed: a second request after it is parsed, and refused. */
	char *got = relay_case(
		"POST /a HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n",
		"3\r\nabc\r\n0\r\n\r\nGET http://denied.test/ HTTP/1.1\r\nHost: "
		"allowed.test\r\n\r\n",
		&r);

	cr_assert_lt(r.err, 0);
	cr_assert(strstr(got, "3\r\nabc\r\n0\r\n\r\n"), "%s", got);
	cr_assert_null(strstr(got, "denied"), "%s", got);
}

Test(http_relay, bare_lf_and_bad_chunk_refused)
{
	struct relay_run r;
	char *got = relay_case("GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			       "GET /b HTTP/1.1\nHost: denied.test\n\n", &r);

	cr_assert_eq(r.err, -EPROTO);
	cr_assert_null(strstr(got, "denied"), "%s", got);
	got = relay_case(
		"POST /a HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n",
		"fffffffffffffffffffff\r\n", &r);
	cr_assert_eq(r.err, -EPROTO);
}

/* Issue 29: a trailer is never passed on. One that hides a second request behind bare LFs (a
 * server that takes LF as a line end would read it) is refused, and nothing of it goes up. */
Test(http_relay, trailer_hiding_a_request_refused)
{
	struct relay_run r;
	char *got = relay_case(
		"POST /a HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n",
		"3\r\nabc\r\n0\r\nX: y\n\nGET /admin HTTP/1.1\r\nHost: denied.test\r\n\r\n", &r);

	cr_assert_eq(r.err, -EPROTO, "%d", r.err);
	cr_assert_null(strstr(got, "denied"), "%s", got);
	cr_assert_null(strstr(got, "admin"), "%s", got);
	/* obsolete line folding, a bare CR, no colon, a space before the colon */
	static const char *const bad[] = {"X: a\r\n b\r\n\r\n", "X: a\rb\r\n\r\n",
					  "GET /admin HTTP/1.1\r\n\r\n", "X : a\r\n\r\n"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char guest[256];
		const char *body;

		snprintf(guest, sizeof(guest), "3\r\nabc\r\n0\r\n%s", bad[i]);
		got = relay_case("POST /a HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: "
				 "chunked\r\n\r\n",
				 guest, &r);
		body = strstr(got, "\r\n\r\n");
		cr_assert_eq(r.err, -EPROTO, "bad[%zu]: %d", i, r.err);
		cr_assert(body && !strchr(body + 4, 'X'), "bad[%zu]: %s", i, got);
		cr_assert_null(strstr(got, "admin"), "bad[%zu]: %s", i, got);
	}
}

/* Well-formed trailers are dropped (the final CRLF is sent), chunk extensions too: what goes
 * upstream is only what was parsed; the next request on the connection is read as one. */
Test(http_relay, trailers_and_extensions_dropped)
{
	struct relay_run r;
	char *got = relay_case(
		"POST /a HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n",
		"3;ext=\"x\"\r\nabc\r\n00\r\nX-Sum: 1\r\nHost: denied.test\r\n\r\n"
		"GET /b HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		&r);

	cr_assert_eq(r.err, 0, "%d %s", r.err, r.why ? r.why : "");
	cr_assert(strstr(got, "\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /b HTTP/1.1\r\n"), "%s", got);
	cr_assert_null(strstr(got, "X-Sum"), "%s", got);
	cr_assert_null(strstr(got, "denied"), "%s", got);
	cr_assert_null(strstr(got, "ext"), "%s", got);
}

/* A refused first request is answered: nothing went upstream, so no response is on its way. */
Test(http_relay, refusal_answered)
{
	struct relay_run r;
	char *got = relay_case("GET /a HTTP/1.1\r\nHost: denied.test\r\n\r\n", "", &r);

	cr_assert_eq(r.err, -EACCES);
	cr_assert_str_eq(got, "");
	cr_assert(strncmp(answer, "HTTP/1.1 403 ", 13) == 0, "%s", answer);
	got = relay_case("GET /a HTTP/1.1\r\nHost: allowed.test\r\nX: a\r\n b\r\n\r\n", "", &r);
	cr_assert_eq(r.err, -EPROTO);
	cr_assert_str_eq(got, "");
	cr_assert(strncmp(answer, "HTTP/1.1 400 ", 13) == 0, "%s", answer);
}

static bool gated_http_ok = true; /* false: a credentialed host's connection */

static void *run_gated(void *arg)
{
	struct relay_run *r = arg;

	r->err = http_relay_gated(r->g, r->u, "allowed.test", gated_http_ok, 2000, NULL, &r->up,
				  &r->down, &r->why);
	return NULL;
}

/* A server-first connection: upstream says `banner` first (the guest must get it before it
 * sends a byte), then the guest sends `guest` and ends; what upstream received. */
static char *gated_case(const char *banner, const char *guest, struct relay_run *r)
{
	int gp[2], up[2];
	static char got[8192];
	char b[256];
	size_t n = 0, a = 0;
	ssize_t k;
	pthread_t t;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, gp), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, up), 0);
	*r = (struct relay_run){.g = gp[1], .u = up[1]};
	cr_assert_eq(pthread_create(&t, NULL, run_gated, r), 0);
	cr_assert_eq(write(up[0], banner, strlen(banner)), (ssize_t)strlen(banner));
	cr_assert_eq(read(gp[0], b, strlen(banner)), (ssize_t)strlen(banner));
	cr_assert_eq(memcmp(b, banner, strlen(banner)), 0);
	if (*guest)
		cr_assert_eq(write(gp[0], guest, strlen(guest)), (ssize_t)strlen(guest));
	shutdown(gp[0], SHUT_WR);
	while ((k = read(up[0], got + n, sizeof(got) - 1 - n)) > 0)
		n += (size_t)k;
	got[n] = 0;
	close(up[0]);
	pthread_join(t, NULL);
	while ((k = recv(gp[0], answer + a, sizeof(answer) - 1 - a, MSG_DONTWAIT)) > 0)
		a += (size_t)k;
	answer[a] = 0;
	close(gp[0]);
	close(gp[1]);
	close(up[1]);
	return got;
}

/* Issue 29: what the guest sends first on a server-first connection (a CONNECT tunnel to a
 * port where the server may speak first, a synthetic address off 80 and 443) goes through the
 * same gate as a transparent connection's first bytes: HTTP is checked request by request,
 * what is positively something else goes raw, what stops undecided is refused. */
Test(http_relay, gated_first_bytes)
{
	struct relay_run r;
	char *got = gated_case("220 hello\r\n", "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n", &r);

	cr_assert_eq(r.err, -EACCES, "%d", r.err);
	cr_assert_str_eq(got, "");
	cr_assert(strstr(answer, "HTTP/1.1 403 "), "%s", answer);
	got = gated_case("220 hello\r\n", "\r\nGET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", &r);
	cr_assert_eq(r.err, -EPROTO, "%d", r.err);
	cr_assert_str_eq(got, "");
	got = gated_case("220 hello\r\n", "get / HTTP/1.1\r\nHost: allowed.test\r\n", &r);
	cr_assert_eq(r.err, -EPROTO, "%d", r.err);
	cr_assert_str_eq(got, "");
	got = gated_case("x",
			 "get / HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /b HTTP/1.1\r\n"
			 "Host: denied.test\r\n\r\n",
			 &r);
	cr_assert_eq(r.err, -EACCES, "%d", r.err);
	cr_assert_str_eq(got, "get / HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
	got = gated_case("SSH-2.0-server\r\n", "SSH-2.0-client\r\n\x01\x02GET / HTTP/1.1\r\n", &r);
	cr_assert_eq(r.err, 0, "%d %s", r.err, r.why ? r.why : "");
	cr_assert_eq(r.up, 34);
	cr_assert_str_eq(got, "SSH-2.0-client\r\n\x01\x02GET / HTTP/1.1\r\n");
	got = gated_case("220 hello\r\n", "", &r);
	cr_assert_eq(r.err, 0, "%d", r.err);
	cr_assert_eq(r.up, 0);
	/* A credentialed host gets no plain HTTP, whatever its Host. */
	gated_http_ok = false;
	got = gated_case("x", "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", &r);
	gated_http_ok = true;
	cr_assert_eq(r.err, -EACCES, "%d", r.err);
	cr_assert_str_eq(got, "");
}
