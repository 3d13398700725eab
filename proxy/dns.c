/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandbox's DNS (docs/network.md "Decisions"): a UDP server on 10.0.2.1:53 in the sandbox's
 * namespace that answers an allowed name's A query with the name's synthetic address from
 * 10.0.128.0/17 (stable, kept in DIR/dns.map), an AAAA query with an empty answer, and a
 * denied name with NXDOMAIN without asking anyone. Allowed names are resolved by a small stub
 * resolver of our own (UDP to the policy's resolver; never the host's resolver library, so the
 * tests control every answer), with a bounded cache that conn.c uses too.
 *
 * Every packet is hostile: names are read with bounds on every label and pointer, pointers only
 * go backwards (no loops), sizes are capped; anything malformed is dropped and logged.
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

#define DNS_HDR		   12
#define DNS_TYPE_A	   1
#define DNS_TYPE_CNAME	   5
#define DNS_TYPE_AAAA	   28
#define DNS_CLASS_IN	   1
#define DNS_RCODE_OK	   0
#define DNS_RCODE_FORMERR  1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP   4
#define DNS_RCODE_REFUSED  5
#define DNS_TIMEOUT_MS	   2000
#define DNS_CACHE_MAX	   1024
#define DNS_MAX_RR	   64
#define DNS_ANSWER_TTL	   60
#define DNS_RECV_MAX	   4096

static uint16_t dns_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void dns_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* ---- the wire format ---- */

int dns_read_name(const uint8_t *pkt, size_t len, size_t *off, char *out, size_t outlen)
{
	size_t pos = *off, o = 0, limit = pos; /* a pointer must point below `limit` */
	bool jumped = false;
	unsigned hops = 0;

	if (outlen == 0)
		return -EINVAL;
	for (;;) {
		uint8_t l;

		if (pos >= len)
			return -EINVAL;
		l = pkt[pos];
		if ((l & 0xc0) == 0xc0) {
			size_t to;

			if (pos + 1 >= len || ++hops > 64)
				return -EINVAL;
			to = (size_t)(l & 0x3f) << 8 | pkt[pos + 1];
			/* Strictly backwards and past the header: no loops. */
			if (to < DNS_HDR || to >= limit)
				return -EINVAL;
			if (!jumped)
				*off = pos + 2;
			jumped = true;
			limit = to;
			pos = to;
			continue;
		}
		if (l & 0xc0)
			return -EINVAL; /* the 0x40 and 0x80 label types */
		if (l == 0) {
			if (!jumped)
				*off = pos + 1;
			break;
		}
		if (pos + 1 + l > len || o + l + 1 > 255 || o + l + 1 >= outlen)
			return -EINVAL;
		if (o)
			out[o++] = '.';
		for (unsigned i = 0; i < l; i++) {
			char c = (char)pkt[pos + 1 + i];

			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
			      c == '_'))
				return -EINVAL;
			out[o++] = c;
		}
		pos += 1 + l;
	}
	out[o] = 0;
	return 0;
}

int dns_parse_query(const uint8_t *pkt, size_t len, struct dns_query *q)
{
	size_t off = DNS_HDR;

	if (len < DNS_HDR || len > DNS_RECV_MAX)
		return -EINVAL;
	q->id = dns_get16(pkt);
	q->flags = dns_get16(pkt + 2);
	if (q->flags & 0x8000)
		return -EINVAL; /* a response */
	if (dns_get16(pkt + 4) != 1 || dns_get16(pkt + 6) != 0 || dns_get16(pkt + 8) != 0)
		return -EINVAL;
	if (dns_read_name(pkt, len, &off, q->name, sizeof(q->name)) < 0)
		return -EINVAL;
	if (off + 4 > len)
		return -EINVAL;
	q->qtype = dns_get16(pkt + off);
	q->qclass = dns_get16(pkt + off + 2);
	q->qend = off + 4;
	return 0;
}

/* Encode dotted `name` as labels at buf; the length or -EINVAL. */
static int dns_put_name(uint8_t *buf, size_t len, const char *name)
{
	size_t o = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		if (l == 0 || l > 63 || o + 1 + l + 1 > len || o + 1 + l > 254)
			return -EINVAL;
		buf[o++] = (uint8_t)l;
		memcpy(buf + o, name, l);
		o += l;
		name += l + (dot ? 1 : 0);
	}
	if (o + 1 > len)
		return -EINVAL;
	buf[o++] = 0;
	return (int)o;
}

int dns_build_query(uint8_t *buf, size_t len, uint16_t id, const char *name, uint16_t qtype)
{
	int n;

	if (len < DNS_HDR + 4)
		return -EINVAL;
	memset(buf, 0, DNS_HDR);
	dns_put16(buf, id);
	dns_put16(buf + 2, 0x0100); /* RD */
	dns_put16(buf + 4, 1);
	n = dns_put_name(buf + DNS_HDR, len - DNS_HDR - 4, name);
	if (n < 0)
		return n;
	dns_put16(buf + DNS_HDR + n, qtype);
	dns_put16(buf + DNS_HDR + n + 2, DNS_CLASS_IN);
	return DNS_HDR + n + 4;
}

int dns_parse_answer(const uint8_t *pkt, size_t len, uint16_t id, const char *name,
		     struct in_addr *addrs, unsigned max, unsigned *naddrs, uint32_t *ttl,
		     unsigned *rcode)
{
	struct {
		char owner[NAME_MAX_TEXT];
		uint16_t type;
		uint32_t ttl;
		union {
			struct in_addr a;
			char target[NAME_MAX_TEXT];
		} u;
	} *rr = NULL;
	char qname[NAME_MAX_TEXT], cur[NAME_MAX_TEXT];
	size_t off = DNS_HDR;
	unsigned an, nrr = 0, n = 0;
	uint32_t minttl = UINT32_MAX;
	int err = -EINVAL;

	*naddrs = 0;
	if (len < DNS_HDR || dns_get16(pkt) != id || !(dns_get16(pkt + 2) & 0x8000) ||
	    dns_get16(pkt + 4) != 1)
		return -EINVAL;
	*rcode = dns_get16(pkt + 2) & 0xf;
	an = dns_get16(pkt + 6);
	if (dns_read_name(pkt, len, &off, qname, sizeof(qname)) < 0 || strcmp(qname, name) != 0 ||
	    off + 4 > len || dns_get16(pkt + off) != DNS_TYPE_A ||
	    dns_get16(pkt + off + 2) != DNS_CLASS_IN)
		return -EINVAL;
	off += 4;
	if (an > DNS_MAX_RR)
		an = DNS_MAX_RR;
	rr = calloc(an ? an : 1, sizeof(*rr));
	if (!rr)
		return -ENOMEM;
	for (unsigned i = 0; i < an; i++) {
		uint16_t type, cls, rdlen;
		uint32_t t;

		if (dns_read_name(pkt, len, &off, rr[nrr].owner, sizeof(rr[nrr].owner)) < 0 ||
		    off + 10 > len)
			goto out;
		type = dns_get16(pkt + off);
		cls = dns_get16(pkt + off + 2);
		t = (uint32_t)dns_get16(pkt + off + 4) << 16 | dns_get16(pkt + off + 6);
		rdlen = dns_get16(pkt + off + 8);
		off += 10;
		if (off + rdlen > len)
			goto out;
		rr[nrr].type = type;
		rr[nrr].ttl = t;
		if (cls == DNS_CLASS_IN && type == DNS_TYPE_A && rdlen == 4) {
			memcpy(&rr[nrr].u.a, pkt + off, 4);
			nrr++;
		} else if (cls == DNS_CLASS_IN && type == DNS_TYPE_CNAME) {
			size_t roff = off;

			if (dns_read_name(pkt, off + rdlen, &roff, rr[nrr].u.target,
					  sizeof(rr[nrr].u.target)) < 0)
				goto out;
			nrr++;
		}
		off += rdlen;
	}
	/* Follow the CNAME chain from the question, at most 8 links. */
	snprintf(cur, sizeof(cur), "%s", name);
	for (unsigned hop = 0; hop < 8 && n == 0; hop++) {
		const char *next = NULL;

		for (unsigned i = 0; i < nrr; i++) {
			if (strcmp(rr[i].owner, cur) != 0)
				continue;
			if (rr[i].type == DNS_TYPE_A && n < max) {
				addrs[n++] = rr[i].u.a;
				minttl = rr[i].ttl < minttl ? rr[i].ttl : minttl;
			} else if (rr[i].type == DNS_TYPE_CNAME && !next) {
				next = rr[i].u.target;
				minttl = rr[i].ttl < minttl ? rr[i].ttl : minttl;
			}
		}
		if (n || !next)
			break;
		snprintf(cur, sizeof(cur), "%s", next);
	}
	*naddrs = n;
	*ttl = minttl == UINT32_MAX ? 0 : minttl;
	err = 0;
out:
	free(rr);
	return err;
}

int dns_build_response(const uint8_t *pkt, const struct dns_query *q, unsigned rcode,
		       const struct in_addr *a, uint8_t *out, size_t outlen)
{
	size_t n = q->qend;

	if (q->qend < DNS_HDR || n + 16 > outlen)
		return -EINVAL;
	memcpy(out, pkt, q->qend);
	/* QR, the query's opcode and RD, AA, RA, the rcode. */
	dns_put16(out + 2,
		  (uint16_t)(0x8000 | (q->flags & 0x7900) | 0x0400 | 0x0080 | (rcode & 0xf)));
	dns_put16(out + 4, 1);
	dns_put16(out + 6, a ? 1 : 0);
	dns_put16(out + 8, 0);
	dns_put16(out + 10, 0);
	if (a) {
		dns_put16(out + n, 0xc000 | DNS_HDR);
		dns_put16(out + n + 2, DNS_TYPE_A);
		dns_put16(out + n + 4, DNS_CLASS_IN);
		dns_put16(out + n + 6, 0);
		dns_put16(out + n + 8, DNS_ANSWER_TTL);
		dns_put16(out + n + 10, 4);
		memcpy(out + n + 12, a, 4);
		n += 16;
	}
	return (int)n;
}

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
	unsigned nnames;
	int map_fd;
	struct dns_cache_entry cache[DNS_CACHE_MAX];
};

static char dns_reserved[] = "";

static uint32_t dns_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The slot of `name`, or the first free slot of its probe chain (*found false). */
static unsigned dns_slot(struct dns_state *d, const char *name, bool *found)
{
	unsigned i = dns_hash(name) % SYNTH_SIZE;

	for (unsigned k = 0; k < SYNTH_SIZE; k++, i = (i + 1) % SYNTH_SIZE) {
		if (!d->names[i]) {
			*found = false;
			return i;
		}
		if (d->names[i] != dns_reserved && strcmp(d->names[i], name) == 0) {
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
	d->names[0] = dns_reserved;		 /* 10.0.128.0 */
	d->names[SYNTH_SIZE - 1] = dns_reserved; /* 10.0.255.255 */
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

/* One exchange with the resolver: a fresh socket (a random source port), a random id; replies
 * from elsewhere or to another id are ignored. */
static int dns_ask(const struct sockaddr *rs, socklen_t rlen, const char *name,
		   struct in_addr *addrs, unsigned max, unsigned *n, uint32_t *ttl)
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
		return -errno;
	/* connect: the kernel drops datagrams from any other address and port. */
	if (connect(fd, rs, rlen) < 0 || send(fd, q, (size_t)qlen, 0) != qlen) {
		err = -errno;
		goto out;
	}
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
	       const char *name, struct in_addr *addrs, unsigned max, unsigned *n)
{
	uint32_t ttl = 0;
	int err, hit;

	*n = 0;
	if (rlen == 0)
		return -ENETUNREACH; /* no resolver on this host: nothing resolves */
	hit = dns_cache_get(d, name, addrs, max, n);
	if (hit)
		return hit > 0 ? 0 : hit;
	err = dns_ask(resolver, rlen, name, addrs, max, n, &ttl);
	if (err == -ETIMEDOUT || err == -EIO)
		err = dns_ask(resolver, rlen, name, addrs, max, n, &ttl); /* one retry */
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

/* An allowed name's A query: resolve, drop special answers, answer the synthetic address. */
static void dns_answer_a(struct dns_job *j, const char *rule)
{
	struct proxy *px = j->px;
	struct in_addr addrs[DNS_MAX_ADDRS], synth;
	char why[RULE_LEN] = "", first[INET_ADDRSTRLEN] = "";
	unsigned n, ok = 0;
	int err = dns_lookup(px->dns, (struct sockaddr *)&px->pol->resolver_sa,
			     px->pol->resolver_salen, j->q.name, addrs, DNS_MAX_ADDRS, &n);

	if (err == -ENOENT) {
		dns_reply(j, DNS_RCODE_NXDOMAIN, NULL);
		dns_audit(j->q.name, NULL, "error", rule, "no such name upstream");
		return;
	}
	if (err < 0) {
		dns_reply(j, DNS_RCODE_SERVFAIL, NULL);
		dns_audit(j->q.name, NULL, "error", rule,
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
		dns_audit(j->q.name, first, "error", rule, "synthetic pool full");
		return;
	}
	dns_reply(j, DNS_RCODE_OK, &synth);
	dns_audit(j->q.name, first, "allow", rule, NULL);
}

static void *dns_worker(void *arg)
{
	struct dns_job *j = arg;
	char rule[RULE_LEN];

	policy_check_name(j->px->pol, j->q.name, 0, rule, sizeof(rule));
	dns_answer_a(j, rule);
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
	char rule[RULE_LEN];
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
	if (!policy_check_name(px->pol, j->q.name, 0, rule, sizeof(rule))) {
		/* Denied: NXDOMAIN, and the query never leaves the host. */
		dns_reply(j, DNS_RCODE_NXDOMAIN, NULL);
		dns_audit(j->q.name, NULL, "deny", rule, NULL);
		free(j);
		return;
	}
	if (j->q.qtype != DNS_TYPE_A) {
		/* The guest has no IPv6; other types have nothing for it either. */
		dns_reply(j, DNS_RCODE_OK, NULL);
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
