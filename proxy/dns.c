/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's DNS (docs/network.md "Decisions"): a UDP server on 10.0.2.1:53 in the sandbox's
 * namespace that answers an allowed name's A query with the name's synthetic address from
 * 10.0.128.0/17 (stable, kept in DIR/dns.map), an AAAA query with an empty answer, and a
 * denied name with NXDOMAIN without asking anyone. Allowed names are resolved by a small stub
 * resolver of our own (UDP to the policy's resolver; never the host's resolver library, so the
 * tests control every answer), with a bounded cache that conn.c uses too. The packets' format
 * is dns_wire.c's; anything malformed is dropped and logged.
 *
 * A query the proxy sends its resolver is what leaves the sandbox, whoever asked (the guest's
 * query for a new name, or a connection to a name not in the cache): each is taken from the
 * sandbox's rate (DNS_UPSTREAM_RATE, a token bucket) and its bytes from the egress budget
 * before it is sent, and refused when either is spent. A name the cache or the synthetic map
 * knows is answered at once, on the server's thread, asking no one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "proxy.h"

#define DNS_TIMEOUT_MS 2000
#define DNS_CACHE_MAX  1024

/* ---- the synthetic map and the cache ---- */

struct dns_cache_entry {
	char name[NAME_MAX_TEXT];
	struct in_addr addrs[DNS_MAX_ADDRS];
	unsigned n;
	int result; /* 0 or -ENOENT */
	uint64_t expires_ms, used_ms;
};

struct dns_state {
	pthread_mutex_t lock;
	char *names[SYNTH_SIZE]; /* by index in the pool; dns_reserved for unusable slots */
	/* Each name's keyed hash (dns_tag): a probe compares these before a name, so names a
	 * guest made to share one probe chain cost a word each to pass, not a strcmp. */
	uint32_t tags[SYNTH_SIZE], tag_key;
	unsigned nnames;
	int map_fd;
	struct dns_cache_entry cache[DNS_CACHE_MAX];
	/* The upstream queries' token bucket, in thousandths of a query, as of `refilled_ms`:
	 * DNS_UPSTREAM_RATE thousandths come back each millisecond (that many a second). */
	uint64_t tokens_milli, refilled_ms;
};

static char dns_reserved[] = "";

/* Where a name's probe chain starts: unkeyed, so dns.map's placements stay where a restarted
 * proxy looks for them. */
static uint32_t dns_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* A name's tag: the same hash from a random start of this process's, so which names share a
 * tag is not the guest's to choose. */
static uint32_t dns_tag(const struct dns_state *d, const char *s)
{
	uint32_t h = 2166136261u ^ d->tag_key;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h ^ (h >> 15);
}

/* The slot of `name`, or the first free slot of its probe chain (*found false). */
static unsigned dns_slot(struct dns_state *d, const char *name, bool *found)
{
	unsigned i = dns_hash(name) % SYNTH_SIZE;
	uint32_t tag = dns_tag(d, name);

	for (unsigned k = 0; k < SYNTH_SIZE; k++, i = (i + 1) % SYNTH_SIZE) {
		if (!d->names[i]) {
			*found = false;
			return i;
		}
		if (d->tags[i] == tag && d->names[i] != dns_reserved &&
		    strcmp(d->names[i], name) == 0) {
			*found = true;
			return i;
		}
	}
	*found = false;
	return SYNTH_SIZE;
}

struct dns_state *dns_state_new(const char *map_path, char *err, size_t errlen)
{
	struct dns_state *d = calloc(1, sizeof(*d));
	char *text = NULL, *line, *save = NULL;
	int e;

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->map_fd = -1;
	d->tokens_milli = DNS_UPSTREAM_BURST * 1000ull;
	d->refilled_ms = now_ms();
	if (getrandom(&d->tag_key, sizeof(d->tag_key), 0) != sizeof(d->tag_key))
		d->tag_key = (uint32_t)now_ms() ^ (uint32_t)getpid(); /* only speed rests on it */
	d->names[0] = dns_reserved;				      /* 10.0.128.0 */
	d->names[SYNTH_SIZE - 1] = dns_reserved;		      /* 10.0.255.255 */
	if (!map_path)
		return d;
	e = read_file(map_path, 64u << 20, &text, NULL); /* its own file: never a link */
	if (e < 0 && e != -ENOENT) {
		snprintf(err, errlen, "%s: %s", map_path, strerror(-e));
		dns_state_free(d);
		return NULL;
	}
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char addr[32], name[NAME_MAX_TEXT + 1], norm[NAME_MAX_TEXT];
		struct in_addr a;
		uint32_t idx;

		/* A torn last line (a crash mid-append) or junk is skipped, not fatal. */
		if (sscanf(line, "%31s %254s", addr, name) != 2 ||
		    inet_pton(AF_INET, addr, &a) != 1 ||
		    (ntohl(a.s_addr) & SYNTH_MASK) != SYNTH_NET ||
		    !netpol_name_norm(name, norm, sizeof(norm)))
			continue;
		idx = ntohl(a.s_addr) & ~SYNTH_MASK;
		if (d->names[idx])
			continue;
		d->names[idx] = strdup(norm);
		d->tags[idx] = dns_tag(d, norm);
		d->nnames++;
	}
	free(text);
	d->map_fd = open(map_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (d->map_fd < 0) {
		snprintf(err, errlen, "%s: %s", map_path, strerror(errno));
		dns_state_free(d);
		return NULL;
	}
	return d;
}

void dns_state_free(struct dns_state *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < SYNTH_SIZE; i++) {
		if (d->names[i] != dns_reserved)
			free(d->names[i]);
	}
	if (d->map_fd >= 0)
		close(d->map_fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int dns_synth_get(struct dns_state *d, const char *name, struct in_addr *out)
{
	bool found;
	unsigned i;
	int err = 0;

	pthread_mutex_lock(&d->lock);
	i = dns_slot(d, name, &found);
	if (i == SYNTH_SIZE) {
		err = -ENOSPC;
		goto out;
	}
	if (!found) {
		char line[NAME_MAX_TEXT + 32];
		struct in_addr a = {.s_addr = htonl(SYNTH_NET | i)};
		int n;

		d->names[i] = strdup(name);
		if (!d->names[i]) {
			err = -ENOMEM;
			goto out;
		}
		d->tags[i] = dns_tag(d, name);
		d->nnames++;
		n = snprintf(line, sizeof(line), "%s %s\n", inet_ntoa(a), name);
		if (d->map_fd >= 0 && write_all(d->map_fd, line, (size_t)n) < 0)
			proxy_log("dns.map: cannot append %s", name);
	}
	out->s_addr = htonl(SYNTH_NET | i);
out:
	pthread_mutex_unlock(&d->lock);
	return err;
}

int dns_synth_name(struct dns_state *d, struct in_addr a, char *name, size_t len)
{
	uint32_t h = ntohl(a.s_addr);
	int err = -ENOENT;

	if ((h & SYNTH_MASK) != SYNTH_NET)
		return -ENOENT;
	pthread_mutex_lock(&d->lock);
	if (d->names[h & ~SYNTH_MASK] && d->names[h & ~SYNTH_MASK] != dns_reserved) {
		snprintf(name, len, "%s", d->names[h & ~SYNTH_MASK]);
		err = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return err;
}

/* The synthetic address of `name` if it has one already (nothing allocated). */
static bool dns_synth_known(struct dns_state *d, const char *name, struct in_addr *out)
{
	bool found;
	unsigned i;

	pthread_mutex_lock(&d->lock);
	i = dns_slot(d, name, &found);
	pthread_mutex_unlock(&d->lock);
	if (found)
		out->s_addr = htonl(SYNTH_NET | i);
	return found;
}

/* A fresh cache entry for `name`: its result and addresses. 1 on a hit. */
static int dns_cache_get(struct dns_state *d, const char *name, struct in_addr *addrs, unsigned max,
			 unsigned *n)
{
	uint64_t now = now_ms();
	int hit = 0;

	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < DNS_CACHE_MAX; i++) {
		struct dns_cache_entry *c = &d->cache[i];

		if (c->name[0] && c->expires_ms > now && strcmp(c->name, name) == 0) {
			*n = c->n < max ? c->n : max;
			memcpy(addrs, c->addrs, *n * sizeof(*addrs));
			c->used_ms = now;
			hit = c->result == 0 ? 1 : c->result;
			break;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return hit;
}

static void dns_cache_put(struct dns_state *d, const char *name, const struct in_addr *addrs,
			  unsigned n, int result, uint32_t ttl)
{
	uint64_t now = now_ms();
	struct dns_cache_entry *victim = &d->cache[0];

	/* Bounded: at least 5 s (a cache that helps), at most an hour. */
	ttl = ttl < 5 ? 5 : ttl > 3600 ? 3600 : ttl;
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < DNS_CACHE_MAX; i++) {
		struct dns_cache_entry *c = &d->cache[i];

		if (strcmp(c->name, name) == 0 || !c->name[0] || c->expires_ms <= now) {
			victim = c;
			break;
		}
		if (c->used_ms < victim->used_ms)
			victim = c;
	}
	snprintf(victim->name, sizeof(victim->name), "%s", name);
	victim->n = n < DNS_MAX_ADDRS ? n : DNS_MAX_ADDRS;
	memcpy(victim->addrs, addrs, victim->n * sizeof(*addrs));
	victim->result = result;
	victim->expires_ms = now + (uint64_t)ttl * 1000;
	victim->used_ms = now;
	pthread_mutex_unlock(&d->lock);
}

/* ---- what leaves: the rate and the budget ---- */

/* One upstream query from the bucket (`take` false: only look whether there is one). */
static bool dns_rate_take(struct dns_state *d, bool take)
{
	const uint64_t full = DNS_UPSTREAM_BURST * 1000ull;
	uint64_t now = now_ms();
	bool ok;

	pthread_mutex_lock(&d->lock);
	if (now > d->refilled_ms) {
		uint64_t room = full - d->tokens_milli, ms = now - d->refilled_ms;

		/* DNS_UPSTREAM_RATE a second is that many thousandths a millisecond; `full` ms
		 * fill any bucket, so the product is bounded. */
		ms = ms < full ? ms : full;
		d->tokens_milli += ms * DNS_UPSTREAM_RATE < room ? ms * DNS_UPSTREAM_RATE : room;
		d->refilled_ms = now;
	}
	ok = d->tokens_milli >= 1000;
	if (ok && take)
		d->tokens_milli -= 1000;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

/* Take `len` bytes of the egress budget (NULL: no budget), all or nothing: a query is sent
 * whole or not at all, and never takes the budget below zero. */
static bool dns_budget_take(_Atomic int64_t *budget, int64_t len)
{
	int64_t cur;

	if (!budget)
		return true;
	cur = atomic_load(budget);
	do {
		if (cur < len)
			return false;
	} while (!atomic_compare_exchange_weak(budget, &cur, cur - len));
	return true;
}

const char *dns_refusal_rule(int err)
{
	return err == -EAGAIN	? "deny (DNS rate limit)"
	       : err == -EDQUOT ? "deny (egress budget exhausted)"
				: NULL;
}

/* ---- the stub resolver ---- */

/* A token back (a query that was not sent after all). */
static void dns_rate_give(struct dns_state *d)
{
	pthread_mutex_lock(&d->lock);
	if (d->tokens_milli + 1000 <= DNS_UPSTREAM_BURST * 1000ull)
		d->tokens_milli += 1000;
	pthread_mutex_unlock(&d->lock);
}

/* Send query `q` to the resolver on `fd` once the rate and the budget allow it (-EAGAIN,
 * -EDQUOT: nothing sent). The token first: a refusal by the rate never dips the budget a relay
 * is reading. A query that did not leave costs neither. */
static int dns_send(struct dns_state *d, _Atomic int64_t *budget, int fd, const uint8_t *q,
		    size_t qlen)
{
	if (!dns_rate_take(d, true))
		return -EAGAIN;
	if (!dns_budget_take(budget, (int64_t)qlen)) {
		dns_rate_give(d);
		return -EDQUOT;
	}
	if (send(fd, q, qlen, 0) == (ssize_t)qlen)
		return 0;
	if (budget)
		atomic_fetch_add(budget, (int64_t)qlen);
	dns_rate_give(d);
	return -EIO; /* (never -EAGAIN: that is the rate's) */
}

/* One exchange with the resolver: a fresh socket (a random source port), a random id; replies
 * from elsewhere or to another id are ignored. */
static int dns_ask(struct dns_state *d, const struct sockaddr *rs, socklen_t rlen,
		   _Atomic int64_t *budget, const char *name, struct in_addr *addrs, unsigned max,
		   unsigned *n, uint32_t *ttl)
{
	uint8_t q[DNS_MAX_PKT], r[DNS_RECV_MAX];
	uint16_t id;
	uint64_t deadline = now_ms() + DNS_TIMEOUT_MS;
	int fd, qlen, err = -ETIMEDOUT;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id))
		return -EIO;
	qlen = dns_build_query(q, sizeof(q), id, name, DNS_TYPE_A);
	if (qlen < 0)
		return qlen;
	fd = socket(rs->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -EIO;
	/* connect: the kernel drops datagrams from any other address and port. */
	if (connect(fd, rs, rlen) < 0) {
		err = -EIO;
		goto out;
	}
	err = dns_send(d, budget, fd, q, (size_t)qlen);
	if (err < 0)
		goto out;
	err = -ETIMEDOUT;
	for (;;) {
		uint64_t now = now_ms();
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		unsigned rcode;
		ssize_t got;

		if (now >= deadline)
			break;
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		got = recv(fd, r, sizeof(r), MSG_DONTWAIT);
		if (got < 0) {
			if (errno == ECONNREFUSED) {
				err = -EIO;
				break;
			}
			continue;
		}
		if (dns_parse_answer(r, (size_t)got, id, name, addrs, max, n, ttl, &rcode) < 0)
			continue; /* not the answer to this question */
		if (rcode == DNS_RCODE_NXDOMAIN || (rcode == DNS_RCODE_OK && *n == 0))
			err = -ENOENT;
		else if (rcode != DNS_RCODE_OK)
			err = -EIO;
		else
			err = 0;
		break;
	}
out:
	close(fd);
	return err;
}

int dns_lookup(struct dns_state *d, const struct sockaddr *resolver, socklen_t rlen,
	       _Atomic int64_t *budget, const char *name, struct in_addr *addrs, unsigned max,
	       unsigned *n)
{
	uint32_t ttl = 0;
	int err, hit;

	*n = 0;
	if (rlen == 0)
		return -ENETUNREACH; /* no resolver on this host: nothing resolves */
	hit = dns_cache_get(d, name, addrs, max, n);
	if (hit)
		return hit > 0 ? 0 : hit;
	err = dns_ask(d, resolver, rlen, budget, name, addrs, max, n, &ttl);
	if (err == -ETIMEDOUT || err == -EIO) {
		/* One retry, a query like any other; refused, the first failure is the answer. */
		int again = dns_ask(d, resolver, rlen, budget, name, addrs, max, n, &ttl);

		if (!dns_refusal_rule(again))
			err = again;
	}
	if (err == 0)
		dns_cache_put(d, name, addrs, *n, 0, ttl);
	else if (err == -ENOENT)
		dns_cache_put(d, name, addrs, 0, -ENOENT, 30);
	return err;
}

/* ---- the server ---- */

struct dns_job {
	struct proxy *px;
	struct sockaddr_storage from;
	socklen_t fromlen;
	struct dns_query q;
	char rule[RULE_LEN]; /* the policy's rule that allowed the name */
	uint8_t pkt[DNS_RECV_MAX];
	size_t len;
};

static _Atomic unsigned dns_workers;

static void dns_reply(struct dns_job *j, unsigned rcode, const struct in_addr *a)
{
	uint8_t out[DNS_RECV_MAX + 16];
	int n = dns_build_response(j->pkt, &j->q, rcode, a, out, sizeof(out));

	if (n > 0)
		sendto(j->px->dns_fd, out, (size_t)n, 0, (struct sockaddr *)&j->from, j->fromlen);
}

static void dns_audit(const char *name, const char *addr, const char *decision, const char *rule,
		      const char *error)
{
	struct audit_event ev = {.proto = "dns",
				 .name = name,
				 .addr = addr,
				 .decision = decision,
				 .rule = rule,
				 .error = error};

	audit_log(&ev);
}

/* The egress budget the sandbox's queries are charged to; NULL when its policy has none. */
static _Atomic int64_t *dns_budget(struct proxy *px)
{
	return px->pol->egress_bytes ? &px->budget : NULL;
}

/* Answer an allowed name's A query from its lookup (`err`, the addresses): drop special
 * answers, answer the synthetic address. */
static void dns_answer_a(struct dns_job *j, int err, const struct in_addr *addrs, unsigned n)
{
	struct proxy *px = j->px;
	struct in_addr synth;
	char why[RULE_LEN] = "", first[INET_ADDRSTRLEN] = "";
	unsigned ok = 0;

	if (dns_refusal_rule(err)) {
		/* The sandbox's rate or budget is spent and nothing was sent: a denial at a
		 * limit. REFUSED, not SERVFAIL: the sandbox says no (as to a name whose every
		 * address is special); SERVFAIL says the resolver failed, which it did not. */
		dns_reply(j, DNS_RCODE_REFUSED, NULL);
		dns_audit(j->q.name, NULL, "deny", dns_refusal_rule(err), NULL);
		return;
	}
	if (err == -ENOENT) {
		dns_reply(j, DNS_RCODE_NXDOMAIN, NULL);
		dns_audit(j->q.name, NULL, "error", j->rule, "no such name upstream");
		return;
	}
	if (err < 0) {
		dns_reply(j, DNS_RCODE_SERVFAIL, NULL);
		dns_audit(j->q.name, NULL, "error", j->rule,
			  err == -ETIMEDOUT ? "upstream resolver timed out" : "upstream failure");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = addrs[i]};

		if (policy_check_resolved(px->pol, (struct sockaddr *)&sa, why, sizeof(why))) {
			if (!ok++)
				inet_ntop(AF_INET, &addrs[i], first, sizeof(first));
		}
	}
	if (!ok) {
		/* Every answer is special: the name is refused (the rule says which address). */
		dns_reply(j, DNS_RCODE_REFUSED, NULL);
		dns_audit(j->q.name, NULL, "deny", why, NULL);
		return;
	}
	if (dns_synth_get(px->dns, j->q.name, &synth) < 0) {
		dns_reply(j, DNS_RCODE_SERVFAIL, NULL);
		dns_audit(j->q.name, first, "error", j->rule, "synthetic pool full");
		return;
	}
	dns_reply(j, DNS_RCODE_OK, &synth);
	dns_audit(j->q.name, first, "allow", j->rule, NULL);
}

/* Answer at once, on the server's thread, what needs no query upstream: a name the cache
 * holds; a name the synthetic map has (its address again: the guest may dial it without
 * asking anyway, and the connection resolves the name and refuses special addresses itself);
 * no resolver; a query the budget or the rate would refuse (only a look: the worker takes
 * them as it sends, so that a flood past them costs no thread). False: a worker must ask. */
static bool dns_answer_now(struct dns_job *j)
{
	struct proxy *px = j->px;
	_Atomic int64_t *budget = dns_budget(px);
	struct in_addr addrs[DNS_MAX_ADDRS], synth;
	unsigned n = 0;
	int hit = dns_cache_get(px->dns, j->q.name, addrs, DNS_MAX_ADDRS, &n), err;

	if (hit) {
		dns_answer_a(j, hit > 0 ? 0 : hit, addrs, n);
		return true;
	}
	if (dns_synth_known(px->dns, j->q.name, &synth)) {
		dns_reply(j, DNS_RCODE_OK, &synth);
		dns_audit(j->q.name, NULL, "allow", j->rule, NULL);
		return true;
	}
	if (!px->pol->resolver_salen)
		err = -ENETUNREACH;
	else if (budget && atomic_load(budget) <= 0)
		err = -EDQUOT;
	else if (!dns_rate_take(px->dns, false))
		err = -EAGAIN;
	else
		return false;
	dns_answer_a(j, err, NULL, 0);
	return true;
}

static void *dns_worker(void *arg)
{
	struct dns_job *j = arg;
	struct proxy *px = j->px;
	struct in_addr addrs[DNS_MAX_ADDRS];
	unsigned n = 0;
	int err = dns_lookup(px->dns, (struct sockaddr *)&px->pol->resolver_sa,
			     px->pol->resolver_salen, dns_budget(px), j->q.name, addrs,
			     DNS_MAX_ADDRS, &n);

	dns_answer_a(j, err, addrs, n);
	free(j);
	atomic_fetch_sub(&dns_workers, 1);
	return NULL;
}

/* Garbage is logged at most 10 times a second: the guest controls how much there is. */
static bool dns_log_budget(void)
{
	static _Atomic uint64_t second;
	static _Atomic unsigned count;
	uint64_t now = now_ms() / 1000;

	if (atomic_exchange(&second, now) != now)
		atomic_store(&count, 0);
	return atomic_fetch_add(&count, 1) < 10;
}

static void dns_handle(struct dns_job *j)
{
	struct proxy *px = j->px;
	pthread_t t;
	pthread_attr_t attr;

	if (dns_parse_query(j->pkt, j->len, &j->q) < 0) {
		if (dns_log_budget())
			dns_audit(NULL, NULL, "deny", "malformed query", "dropped");
		free(j);
		return;
	}
	if ((j->q.flags & 0x7800) != 0 || j->q.qclass != DNS_CLASS_IN) {
		dns_reply(j, DNS_RCODE_NOTIMP, NULL);
		free(j);
		return;
	}
	if (!policy_check_name(px->pol, j->q.name, 0, j->rule, sizeof(j->rule))) {
		/* Denied: NXDOMAIN, and the query never leaves the host. */
		dns_reply(j, DNS_RCODE_NXDOMAIN, NULL);
		dns_audit(j->q.name, NULL, "deny", j->rule, NULL);
		free(j);
		return;
	}
	if (j->q.qtype != DNS_TYPE_A) {
		/* The guest has no IPv6; other types have nothing for it either. */
		dns_reply(j, DNS_RCODE_OK, NULL);
		free(j);
		return;
	}
	if (dns_answer_now(j)) {
		free(j);
		return;
	}
	if (atomic_fetch_add(&dns_workers, 1) >= DNS_WORKERS_MAX) {
		atomic_fetch_sub(&dns_workers, 1);
		dns_reply(j, DNS_RCODE_SERVFAIL, NULL);
		/* a refusal at a limit the guest reached: a denial (counted past the rate) */
		dns_audit(j->q.name, NULL, "deny", "too many queries at once", NULL);
		free(j);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	if (pthread_create(&t, &attr, dns_worker, j) != 0) {
		atomic_fetch_sub(&dns_workers, 1);
		dns_reply(j, DNS_RCODE_SERVFAIL, NULL);
		free(j);
	}
	pthread_attr_destroy(&attr);
}

void *dns_serve(void *arg)
{
	struct proxy *px = arg;

	for (;;) {
		struct dns_job *j = malloc(sizeof(*j));
		ssize_t n;

		if (!j) {
			sleep(1);
			continue;
		}
		j->px = px;
		j->fromlen = sizeof(j->from);
		n = recvfrom(px->dns_fd, j->pkt, sizeof(j->pkt), MSG_TRUNC,
			     (struct sockaddr *)&j->from, &j->fromlen);
		if (n < 0 || (size_t)n > sizeof(j->pkt)) {
			if (n > 0 && dns_log_budget())
				dns_audit(NULL, NULL, "deny", "oversize query", "dropped");
			free(j);
			continue;
		}
		j->len = (size_t)n;
		dns_handle(j);
	}
	return NULL;
}
