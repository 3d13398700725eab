/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/dns.c, dns_wire.c: hostile queries, answers with CNAME chains, the synthetic map, the
 * upstream queries' rate and egress budget. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

static const uint8_t hdr_query[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};

static size_t mk(uint8_t *buf, const void *body, size_t blen)
{
	memcpy(buf, hdr_query, 12);
	memcpy(buf + 12, body, blen);
	return 12 + blen;
}

Test(dns, good_query)
{
	uint8_t pkt[512], out[600];
	static const uint8_t body[] = {1, 'A', 7,   'E', 'x', 'a', 'm', 'p', 'l', 'e',
				       4, 't', 'e', 's', 't', 0,   0,	1,   0,	  1};
	size_t len = mk(pkt, body, sizeof(body));
	struct dns_query q;
	struct in_addr a = {.s_addr = htonl(0x0a008005)};
	int n;

	cr_assert_eq(dns_parse_query(pkt, len, &q), 0);
	cr_assert_str_eq(q.name, "a.example.test");
	cr_assert_eq(q.qtype, 1);
	cr_assert_eq(q.id, 0x1234);
	n = dns_build_response(pkt, &q, 0, &a, out, sizeof(out));
	cr_assert_eq(n, (int)len + 16);
	cr_assert_eq(out[2] & 0x80, 0x80);
	cr_assert_eq(out[7], 1);
	cr_assert_eq(memcmp(out + n - 4, &a, 4), 0);
}

Test(dns, hostile_queries)
{
	uint8_t pkt[600];
	struct dns_query q;
	/* A pointer to itself, a pointer forward, a pointer into the header. */
	static const uint8_t loop[] = {0xc0, 12, 0, 1, 0, 1};
	static const uint8_t fwd[] = {0xc0, 14, 1, 'a', 0, 0, 1, 0, 1};
	static const uint8_t hdr[] = {0xc0, 2, 0, 1, 0, 1};
	/* A label running past the end, no terminator, the reserved label types. */
	static const uint8_t past[] = {20, 'a', 'b'};
	static const uint8_t noterm[] = {1, 'a', 1, 'b'};
	static const uint8_t ext[] = {0x41, 'a', 0, 0, 1, 0, 1};
	static const uint8_t badchar[] = {3, 'a', '.', 'b', 0, 0, 1, 0, 1};
	static const uint8_t noq[] = {1, 'a', 0, 0, 1};
	uint8_t longname[320];
	size_t o = 0;

	cr_assert_eq(dns_parse_query(pkt, mk(pkt, loop, sizeof(loop)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, fwd, sizeof(fwd)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, hdr, sizeof(hdr)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, past, sizeof(past)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, noterm, sizeof(noterm)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, ext, sizeof(ext)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, badchar, sizeof(badchar)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, noq, sizeof(noq)), &q), -EINVAL);
	cr_assert_eq(dns_parse_query(pkt, 11, &q), -EINVAL);
	/* Five 60-byte labels: over 255 bytes. */
	for (int i = 0; i < 5; i++) {
		longname[o++] = 60;
		memset(longname + o, 'a', 60);
		o += 60;
	}
	longname[o++] = 0;
	memcpy(longname + o, "\0\1\0\1", 4);
	o += 4;
	cr_assert_eq(dns_parse_query(pkt, mk(pkt, longname, o), &q), -EINVAL);
	/* Two questions; a response. */
	mk(pkt, noq, sizeof(noq));
	pkt[5] = 2;
	cr_assert_eq(dns_parse_query(pkt, 12 + sizeof(noq), &q), -EINVAL);
	mk(pkt, noq, sizeof(noq));
	pkt[2] |= 0x80;
	cr_assert_eq(dns_parse_query(pkt, 12 + sizeof(noq), &q), -EINVAL);
}

Test(dns, answer_follows_cname)
{
	uint8_t pkt[512];
	int n = dns_build_query(pkt, sizeof(pkt), 0xbeef, "www.example.test", 1);
	struct in_addr addrs[4];
	unsigned na, rcode;
	uint32_t ttl;
	size_t o;
	/* www CNAME cdn.example.test (TTL 300), cdn A 203.0.113.10 (TTL 60), other A 10.0.0.1. */
	static const uint8_t ans[] = {
		0xc0, 12,  0,	 5,   0, 1, 0, 0, 1, 44, 0, 6,	3,  'c', 'd', 'n', 0xc0, 16, 3, 'c',
		'd',  'n', 0xc0, 16,  0, 1, 0, 1, 0, 0,	 0, 60, 0,  4,	 203, 0,   113,	 10, 5, 'o',
		't',  'h', 'e',	 'r', 0, 0, 1, 0, 1, 0,	 0, 0,	60, 0,	 4,   10,  0,	 0,  1,
	};

	cr_assert_gt(n, 0);
	o = (size_t)n;
	memcpy(pkt + o, ans, sizeof(ans));
	o += sizeof(ans);
	pkt[2] = 0x81;
	pkt[3] = 0x80;
	pkt[7] = 3;
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeef, "www.example.test", addrs, 4, &na, &ttl, &rcode),
		0);
	cr_assert_eq(na, 1);
	cr_assert_eq(ntohl(addrs[0].s_addr), 0xcb00710a);
	cr_assert_eq(ttl, 60);
	cr_assert_eq(rcode, 0);
	/* The wrong id, the wrong name, truncated. */
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeee, "www.example.test", addrs, 4, &na, &ttl, &rcode),
		-EINVAL);
	cr_assert_eq(
		dns_parse_answer(pkt, o, 0xbeef, "www.example.tes", addrs, 4, &na, &ttl, &rcode),
		-EINVAL);
	for (size_t cut = 12; cut < o; cut++) {
		int e = dns_parse_answer(pkt, cut, 0xbeef, "www.example.test", addrs, 4, &na, &ttl,
					 &rcode);

		cr_assert(e == -EINVAL || (e == 0 && na == 0), "cut %zu", cut);
	}
}

Test(dns, synthetic_map_persists)
{
	char dir[] = "/tmp/test_dns_XXXXXX", path[64], name[NAME_MAX_TEXT];
	struct in_addr a, b, c;
	struct dns_state *d;
	char err[128];

	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dns.map", dir);
	d = dns_state_new(path, err, sizeof(err));
	cr_assert(d, "%s", err);
	cr_assert_eq(dns_synth_get(d, "a.example.test", &a), 0);
	cr_assert_eq(dns_synth_get(d, "b.example.test", &b), 0);
	cr_assert_eq(dns_synth_get(d, "a.example.test", &c), 0);
	cr_assert_eq(a.s_addr, c.s_addr);
	cr_assert_neq(a.s_addr, b.s_addr);
	cr_assert_eq(ntohl(a.s_addr) & SYNTH_MASK, SYNTH_NET);
	dns_state_free(d);
	d = dns_state_new(path, err, sizeof(err));
	cr_assert(d, "%s", err);
	cr_assert_eq(dns_synth_name(d, b, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "b.example.test");
	cr_assert_eq(dns_synth_get(d, "a.example.test", &c), 0);
	cr_assert_eq(a.s_addr, c.s_addr);
	c.s_addr = htonl(0x0a000201);
	cr_assert_eq(dns_synth_name(d, c, name, sizeof(name)), -ENOENT);
	dns_state_free(d);
	unlink(path);
	rmdir(dir);
}

/* ---- what leaves: the rate and the budget (dns_lookup against a resolver of the test's) ---- */

/* A resolver on 127.0.0.1 that counts the queries it receives and answers each NXDOMAIN. */
struct fake_resolver {
	int fd;
	struct sockaddr_in sa;
	pthread_t t;
	_Atomic unsigned queries;
	_Atomic bool stop;
};

static void *fake_resolver_run(void *arg)
{
	struct fake_resolver *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		uint8_t pkt[DNS_RECV_MAX];
		ssize_t n;

		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = recvfrom(r->fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&from, &fl);
		if (n < 12)
			continue;
		atomic_fetch_add(&r->queries, 1);
		pkt[2] |= 0x80;	   /* a response */
		pkt[3] = 0x80 | 3; /* RA, NXDOMAIN */
		sendto(r->fd, pkt, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static void fake_resolver_start(struct fake_resolver *r)
{
	socklen_t l = sizeof(r->sa);

	memset(r, 0, sizeof(*r));
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(r->fd, 0);
	r->sa.sin_family = AF_INET;
	r->sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(r->fd, (struct sockaddr *)&r->sa, sizeof(r->sa)), 0);
	cr_assert_eq(getsockname(r->fd, (struct sockaddr *)&r->sa, &l), 0);
	cr_assert_eq(pthread_create(&r->t, NULL, fake_resolver_run, r), 0);
}

static void fake_resolver_stop(struct fake_resolver *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->t, NULL);
	close(r->fd);
}

static int lookup(struct dns_state *d, struct fake_resolver *r, _Atomic int64_t *budget,
		  const char *name)
{
	struct in_addr addrs[DNS_MAX_ADDRS];
	unsigned n;

	return dns_lookup(d, (struct sockaddr *)&r->sa, sizeof(r->sa), budget, name, addrs,
			  DNS_MAX_ADDRS, &n);
}

/* Unique names (each one would carry data to a zone's nameserver): the resolver receives the
 * burst and the rate, no more; the rest are refused before a byte leaves. A cached name
 * costs nothing, and the bucket fills again with time. */
Test(dns, upstream_rate_limit)
{
	struct fake_resolver r;
	struct dns_state *d;
	char err[128], name[NAME_MAX_TEXT];
	unsigned answered = 0, refused = 0, before;
	uint64_t t0;
	double secs;

	fake_resolver_start(&r);
	d = dns_state_new(NULL, err, sizeof(err));
	cr_assert(d, "%s", err);
	t0 = now_ms();
	for (unsigned i = 0; i < 400; i++) {
		int e;

		snprintf(name, sizeof(name), "q%u.exfil.test", i);
		e = lookup(d, &r, NULL, name);
		cr_assert(e == -ENOENT || e == -EAGAIN, "lookup %u: %d", i, e);
		if (e == -ENOENT)
			answered++;
		else
			refused++;
	}
	secs = (double)(now_ms() - t0) / 1000;
	cr_assert_eq(atomic_load(&r.queries), answered);
	cr_assert_geq(answered, DNS_UPSTREAM_BURST);
	cr_assert_leq(answered, DNS_UPSTREAM_BURST + DNS_UPSTREAM_RATE * (secs + 0.1),
		      "%u queries reached the resolver in %.2f s", answered, secs);
	cr_assert_eq(answered + refused, 400);
	cr_assert_str_eq(dns_refusal_rule(-EAGAIN), "deny (DNS rate limit)");
	/* Cached (NXDOMAIN): answered with the bucket empty, nothing sent. */
	before = atomic_load(&r.queries);
	cr_assert_eq(lookup(d, &r, NULL, "q0.exfil.test"), -ENOENT);
	cr_assert_eq(atomic_load(&r.queries), before);
	/* DNS_UPSTREAM_RATE a second come back: after 300 ms, some again (not one more than the
	 * time taken since the bucket was last empty allows). */
	t0 = now_ms();
	usleep(300 * 1000);
	answered = 0;
	for (unsigned i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "later%u.exfil.test", i);
		if (lookup(d, &r, NULL, name) == -ENOENT)
			answered++;
	}
	secs = (double)(now_ms() - t0) / 1000;
	cr_assert(answered >= 5 && answered <= 1 + DNS_UPSTREAM_RATE * (secs + 0.01),
		  "%u queries sent in the %.2f s after the bucket was empty", answered, secs);
	dns_state_free(d);
	fake_resolver_stop(&r);
}

/* Each query sent is charged its size to the egress budget before it leaves; once the budget
 * cannot pay for one, nothing more is sent (and the budget never goes below zero). */
Test(dns, upstream_budget)
{
	struct fake_resolver r;
	struct dns_state *d;
	char err[128], name[NAME_MAX_TEXT], label[61];
	_Atomic int64_t budget = 1000;
	uint8_t q[DNS_MAX_PKT];
	int qlen, e;

	memset(label, 'x', 60);
	label[60] = 0;
	fake_resolver_start(&r);
	d = dns_state_new(NULL, err, sizeof(err));
	cr_assert(d, "%s", err);
	/* Names of one size: 3 x 60 + 1 + 12 ("a000.exfil.test" style) bytes each. */
	snprintf(name, sizeof(name), "%s.%s.%s.a000.exfil.test", label, label, label);
	qlen = dns_build_query(q, sizeof(q), 1, name, 1);
	cr_assert_gt(qlen, 200);
	for (unsigned i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "%s.%s.%s.a%03u.exfil.test", label, label, label, i);
		e = lookup(d, &r, &budget, name);
		if ((int64_t)(i + 1) * qlen <= 1000)
			cr_assert_eq(e, -ENOENT, "query %u: %d", i, e);
		else
			cr_assert_eq(e, -EDQUOT, "query %u: %d", i, e);
	}
	cr_assert_eq(atomic_load(&r.queries), (unsigned)(1000 / qlen));
	cr_assert_eq(atomic_load(&budget), 1000 - (int64_t)(1000 / qlen) * qlen);
	cr_assert_str_eq(dns_refusal_rule(-EDQUOT), "deny (egress budget exhausted)");
	cr_assert_null(dns_refusal_rule(-ENOENT));
	/* A cached name still answers: it costs nothing. */
	snprintf(name, sizeof(name), "%s.%s.%s.a000.exfil.test", label, label, label);
	cr_assert_eq(lookup(d, &r, &budget, name), -ENOENT);
	/* Spent (a relay may take it below zero): a short name is refused too. */
	atomic_store(&budget, -5);
	cr_assert_eq(lookup(d, &r, &budget, "short.exfil.test"), -EDQUOT);
	cr_assert_eq(atomic_load(&budget), -5);
	cr_assert_eq(atomic_load(&r.queries), (unsigned)(1000 / qlen));
	dns_state_free(d);
	fake_resolver_stop(&r);
}
