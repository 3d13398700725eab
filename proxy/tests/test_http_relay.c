/* SPDX-License-Identifier: Apache-2.0 */
/* http_relay: every request on a plain HTTP connection must name the host decided on. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
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

/* Send `guest` (after the first request in `pre`), close the guest's write side, and return
 * what upstream received (upstream answers nothing and closes at the guest's EOF). */
static char *relay_case(const char *pre, const char *guest, struct relay_run *r)
{
	int gp[2], up[2];
	static char got[8192];
	size_t n = 0;
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
