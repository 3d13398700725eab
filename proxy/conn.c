/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's TCP connections (docs/network.md "Decisions"): accepted and held without a thread
 * by the waiting room (waiting.c) until their first bytes decide them (conn_new, conn_take,
 * conn_silent), then served on a thread each, at most CONN_MAX at once (conn_serve).
 * The transparent listener learns the dialed address from SO_ORIGINAL_DST (a synthetic address
 * names the name), reads the first bytes (sniff.c: SNI or Host), decides by name before any
 * upstream connection exists, and connects only to addresses it resolved itself. The explicit
 * listener speaks the HTTP proxy protocol (CONNECT and absolute-URI requests). Credentialed
 * hosts over TLS go to mitm_serve; over plain HTTP they are refused (credentials are never
 * sent in clear, and a request without them would only fail upstream).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http1.h"
#include "mitm.h"
#include "proxy.h"

struct conn {
	struct proxy *px;
	int cfd, ufd;
	uint8_t buf[CONN_PEEK_MAX];
	size_t len;
	char name[NAME_MAX_TEXT]; /* the destination's name; empty: a raw address */
	uint16_t port;
	struct sockaddr_in orig; /* the address the guest dialed (transparent) */
	const char *proto;
	char rule[RULE_LEN];
	char addr[INET6_ADDRSTRLEN]; /* the upstream address */
	const char *error;
	uint64_t up, down;
	bool has_bytes;
	/* Set when accepted (conn_new), before the first byte is read. */
	bool explicit;		   /* the HTTP proxy listener, else the transparent one */
	uint64_t deadline_ms;	   /* when the client's first bytes must have come */
	bool is_synth;		   /* transparent: dialed a synthetic address ... */
	char synth[NAME_MAX_TEXT]; /* ... that names this */
	bool short_wait;	   /* transparent: a destination known without its bytes, not web */
	unsigned takes;		   /* conn_take's reads that did not decide */
	bool dribbled;		   /* ... more than CONN_TAKES_MAX */
	bool reset;		   /* the guest reset it while it waited */
};

static void conn_audit(struct conn *c, const char *decision)
{
	struct audit_event ev = {.proto = c->proto,
				 .name = c->name[0] ? c->name : NULL,
				 .addr = c->addr[0] ? c->addr : NULL,
				 .port = c->port,
				 .decision = decision,
				 .rule = c->rule[0] ? c->rule : NULL,
				 .error = c->error,
				 .bytes_up = c->up,
				 .bytes_down = c->down,
				 .has_bytes = c->has_bytes};

	audit_log(&ev);
}

/* A short answer to the guest, best effort (never blocks). */
static void conn_say(struct conn *c, const char *status, const char *why)
{
	char resp[512];
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n%s\n",
			 status, strlen(why) + 1, why);

	if (n > 0)
		send(c->cfd, resp, (size_t)n < sizeof(resp) ? (size_t)n : sizeof(resp) - 1,
		     MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Read the client's first bytes until `sniff_classify` decides, the buffer is full, EOF or
 * `ms` pass. The kind (SNIFF_MORE when undecided). */
static enum sniff_kind conn_read_first(struct conn *c, unsigned ms, char *name, size_t namelen)
{
	uint64_t deadline = now_ms() + ms;
	enum sniff_kind k = SNIFF_MORE;

	if (c->len)
		k = sniff_classify(c->buf, c->len, name, namelen);
	while (k == SNIFF_MORE && c->len < sizeof(c->buf)) {
		uint64_t now = now_ms();
		struct pollfd pfd = {.fd = c->cfd, .events = POLLIN};
		ssize_t n;

		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) <= 0)
			break;
		n = recv(c->cfd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			break;
		}
		c->len += (size_t)n;
		k = sniff_classify(c->buf, c->len, name, namelen);
	}
	return k;
}

/* The policy for c->name (or the raw address `raw` when no name) on c->port, then the
 * addresses, then a connection to the first that answers: c->ufd. On refusal -EACCES with the
 * rule in c->rule; an upstream failure is another -errno with c->error. */
static int conn_open_upstream(struct conn *c, const struct sockaddr *raw)
{
	struct proxy *px = c->px;
	struct sockaddr_storage lit;
	struct in_addr addrs[DNS_MAX_ADDRS];
	unsigned n = 0, tried = 0;
	int err = -ENOENT;
	socklen_t litlen;

	if (c->name[0] && netpol_hostport_parse(c->name, c->port, &lit, &litlen) == 0) {
		raw = (struct sockaddr *)&lit; /* a name that is an IP literal is a raw address */
		proxy_addr_text(raw, c->addr, sizeof(c->addr));
		c->name[0] = 0;
	}
	if (!c->name[0]) {
		struct sockaddr_storage to;
		socklen_t tolen = raw->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							     : sizeof(struct sockaddr_in);

		proxy_addr_text(raw, c->addr, sizeof(c->addr));
		if (!policy_check_addr(px->pol, raw, c->port, c->rule, sizeof(c->rule)))
			return -EACCES;
		memcpy(&to, raw, tolen);
		((struct sockaddr_in *)&to)->sin_port = htons(c->port); /* same offset in v6 */
		err = conn_connect((struct sockaddr *)&to, tolen, CONN_CONNECT_MS, &c->ufd);
		if (err < 0)
			c->error = "upstream connect failed";
		return err;
	}
	if (!policy_check_name(px->pol, c->name, c->port, c->rule, sizeof(c->rule)))
		return -EACCES;
	err = dns_lookup(px->dns, (struct sockaddr *)&px->pol->resolver_sa, px->pol->resolver_salen,
			 px->pol->egress_bytes ? &px->budget : NULL, c->name, addrs, DNS_MAX_ADDRS,
			 &n);
	if (dns_refusal_rule(err)) {
		/* the sandbox's DNS rate or egress budget is spent: refused, nothing sent */
		snprintf(c->rule, sizeof(c->rule), "%s", dns_refusal_rule(err));
		return -EACCES;
	}
	if (err < 0) {
		c->error = err == -ENOENT ? "no such name" : "name resolution failed";
		return err;
	}
	for (unsigned i = 0; i < n; i++) {
		struct sockaddr_in sa = {
			.sin_family = AF_INET, .sin_port = htons(c->port), .sin_addr = addrs[i]};
		char why[RULE_LEN];

		if (!policy_check_resolved(px->pol, (struct sockaddr *)&sa, why, sizeof(why))) {
			if (tried == 0 && i == n - 1) {
				snprintf(c->rule, sizeof(c->rule), "%s", why);
				inet_ntop(AF_INET, &addrs[i], c->addr, sizeof(c->addr));
				return -EACCES;
			}
			continue;
		}
		tried++;
		inet_ntop(AF_INET, &addrs[i], c->addr, sizeof(c->addr));
		err = conn_connect((struct sockaddr *)&sa, sizeof(sa), CONN_CONNECT_MS, &c->ufd);
		if (err == 0)
			return 0;
	}
	c->error = "upstream connect failed";
	return err;
}

/* Hand a credentialed host's TLS to the interception. */
static int conn_mitm(struct conn *c, const struct pol_cred *cred)
{
	struct mitm_header hs[64];
	struct mitm_rule rule = {.host = cred->host, .headers = hs, .nheaders = 0};
	struct mitm_stats st = {0};
	struct proxy *px = c->px;
	int err;

	if (!px->ca || !px->upstream_ctx) {
		c->error = "interception unavailable";
		return -ENOTSUP;
	}
	for (unsigned i = 0; i < cred->nheaders && i < 64; i++) {
		hs[i].name = cred->headers[i].name;
		hs[i].value = cred->headers[i].value ? cred->headers[i].value : "";
		rule.nheaders++;
	}
	err = mitm_serve(px->ca, (SSL_CTX *)px->upstream_ctx, c->cfd, c->buf, c->len, c->name,
			 &rule, c->ufd, px->idle_ms, px->pol->egress_bytes ? &px->budget : NULL,
			 &st);
	c->up = st.bytes_up;
	c->down = st.bytes_down;
	c->has_bytes = true;
	if (err < 0) {
		static __thread char msg[160];

		snprintf(msg, sizeof(msg), "interception: %s", st.error[0] ? st.error : "failed");
		c->error = msg;
	}
	return err;
}

/* What the guest's first bytes were found to be, for conn_serve_upstream. */
enum conn_carry {
	CARRY_TLS,	/* a ClientHello whose name was decided on */
	CARRY_HTTP,	/* an HTTP/1.x request the strict parser took */
	CARRY_OTHER,	/* positively neither: copied raw */
	CARRY_UNDECIDED /* nothing yet (a server-first port): the first bytes decide later */
};

/*
 * After the decision and the upstream connection: the interception, the HTTP relay or the
 * raw relay. Plain HTTP, and whatever a server-first connection's guest sends first, goes
 * through http_relay: every request must name `host` (the name decided on, or the address
 * when there is none), so no byte of a request for another host goes upstream.
 */
static void conn_serve_upstream(struct conn *c, enum conn_carry what, const char *host)
{
	const struct pol_cred *cred = c->name[0] ? policy_find_cred(c->px->pol, c->name) : NULL;
	_Atomic int64_t *budget = c->px->pol->egress_bytes ? &c->px->budget : NULL;
	int err;

	if (cred && what == CARRY_TLS) {
		strncat(c->rule, " (credentials)", sizeof(c->rule) - strlen(c->rule) - 1);
		err = conn_mitm(c, cred);
	} else if (what == CARRY_HTTP || what == CARRY_UNDECIDED) {
		const char *why;

		if (what == CARRY_HTTP)
			err = http_relay(c->cfd, c->ufd, c->buf, c->len, host, c->px->idle_ms,
					 budget, &c->up, &c->down, &why);
		else
			err = http_relay_gated(c->cfd, c->ufd, host, !cred, c->px->idle_ms, budget,
					       &c->up, &c->down, &why);
		c->has_bytes = true;
		if (err == -EACCES || err == -EPROTO || err == -EBADMSG) {
			snprintf(c->rule, sizeof(c->rule), "deny (%s%s)",
				 err == -EPROTO ? "malformed HTTP request: " : "",
				 why ? why : "refused");
			conn_audit(c, "deny");
			return;
		}
		c->error = why;
	} else {
		err = conn_relay(c->cfd, c->ufd, c->buf, c->len, c->px->idle_ms, budget, &c->up,
				 &c->down);
		c->has_bytes = true;
		if (err == -EDQUOT)
			c->error = "egress budget exhausted";
		else if (err == -ETIMEDOUT)
			c->error = "idle timeout";
		else if (err < 0)
			c->error = "relay failed";
	}
	conn_audit(c, err < 0 && err != -ETIMEDOUT ? "error" : "allow");
}

/*
 * Refuse first bytes that are malformed TLS or HTTP (`k`), or that stopped before they said
 * what they are (SNIFF_MORE): an attempt at HTTP gets a 400 and the parser's reason.
 */
static void conn_refuse_first(struct conn *c, enum sniff_kind k)
{
	char name[NAME_MAX_TEXT];
	const char *why = NULL;
	size_t head;

	if (k == SNIFF_BAD_TLS || (c->len && c->buf[0] == 22)) {
		snprintf(c->rule, sizeof(c->rule), "deny (malformed TLS ClientHello)");
	} else {
		if (k == SNIFF_BAD_HTTP)
			(void)sniff_http(c->buf, c->len, name, sizeof(name), &head, &why);
		snprintf(c->rule, sizeof(c->rule), "deny (malformed HTTP request: %s)",
			 why			   ? why
			 : k == SNIFF_BAD_HTTP	   ? "head too large"
			 : c->len < sizeof(c->buf) ? "an incomplete head"
						   : "head too large");
		conn_say(c, "400 Bad Request", c->rule);
	}
	conn_audit(c, "deny");
}

/* Ports 80 and 443 carry TLS or HTTP: nothing else goes there raw, so that the sniffer's
 * "positively something else" is not the only guard of the Host check on them. */
static bool conn_web_port(uint16_t port)
{
	return port == 80 || port == 443;
}

static void conn_refuse_other(struct conn *c)
{
	snprintf(c->rule, sizeof(c->rule), "deny (neither TLS nor HTTP on port %u)", c->port);
	conn_audit(c, "deny");
}

/* Refuse a credentialed host over plain HTTP: see the file's comment. */
static bool conn_refuse_plain_cred(struct conn *c)
{
	if (!c->name[0] || !policy_find_cred(c->px->pol, c->name))
		return false;
	snprintf(c->rule, sizeof(c->rule), "deny credentialed host over plain HTTP");
	conn_say(c, "403 Forbidden", "sandbox-proxy: credentialed host: use https");
	conn_audit(c, "deny");
	return true;
}

/* The milliseconds left before c->deadline_ms (0 once passed). */
static unsigned conn_left_ms(const struct conn *c)
{
	uint64_t now = now_ms();

	return c->deadline_ms > now ? (unsigned)(c->deadline_ms - now) : 0;
}

/* Accepted on the transparent listener: where the guest dialed, and so how long its first
 * bytes may take. -EACCES (the line written) when it cannot go anywhere. */
static int conn_transparent_begin(struct conn *c)
{
	socklen_t ol = sizeof(c->orig);
	bool web;

	c->proto = "tcp";
	if (getsockopt(c->cfd, SOL_IP, SO_ORIGINAL_DST, &c->orig, &ol) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny (no original destination)");
		conn_audit(c, "deny");
		return -EACCES;
	}
	c->port = ntohs(c->orig.sin_port);
	inet_ntop(AF_INET, &c->orig.sin_addr, c->addr, sizeof(c->addr));
	c->is_synth = (ntohl(c->orig.sin_addr.s_addr) & SYNTH_MASK) == SYNTH_NET;
	if (c->is_synth &&
	    dns_synth_name(c->px->dns, c->orig.sin_addr, c->synth, sizeof(c->synth)) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny unknown synthetic address %s", c->addr);
		conn_audit(c, "deny");
		return -EACCES;
	}
	/* Server-first protocols (ssh, smtp) send nothing: wait for the client only briefly
	 * where the destination is known without its bytes. */
	web = c->port == 80 || c->port == 443;
	c->short_wait =
		!web && (c->is_synth || policy_check_addr(c->px->pol, (struct sockaddr *)&c->orig,
							  c->port, c->rule, sizeof(c->rule)));
	c->rule[0] = 0;
	c->deadline_ms = now_ms() + (c->short_wait ? CONN_SERVER_FIRST_MS : CONN_FIRST_MS);
	return 0;
}

/* A decided connection from the waiting room (waiting.c): c->buf holds what it sent so far;
 * reading goes on until its deadline. */
static void conn_transparent(struct conn *c)
{
	const char *synth = c->synth;
	char sniffed[NAME_MAX_TEXT] = "";
	char host[NAME_MAX_TEXT];
	enum sniff_kind k;
	enum conn_carry what = CARRY_OTHER;
	bool is_synth = c->is_synth, short_wait = c->short_wait;
	int err;

	k = conn_read_first(c, conn_left_ms(c), sniffed, sizeof(sniffed));
	if (k == SNIFF_MORE && c->len > 0 && c->buf[0] == 22)
		k = SNIFF_BAD_TLS; /* a ClientHello that never completed is not let through raw */
	if (k == SNIFF_MORE && c->len == 0)
		k = SNIFF_OTHER; /* silence: refused below unless its server speaks first */
	switch (k) {
	case SNIFF_TLS:
		c->proto = "tls";
		snprintf(c->name, sizeof(c->name), "%s", sniffed[0] ? sniffed : synth);
		what = CARRY_TLS;
		break;
	case SNIFF_HTTP:
		c->proto = "http";
		snprintf(c->name, sizeof(c->name), "%s", sniffed);
		what = CARRY_HTTP;
		break;
	case SNIFF_BAD_TLS:
	case SNIFF_BAD_HTTP:
	case SNIFF_MORE:
		/* Refused: malformed, or first bytes that stopped (a stall, EOF, a full buffer)
		 * before they said what they are. Only bytes that are positively neither TLS
		 * nor an attempt at HTTP go anywhere raw. */
		c->proto = k == SNIFF_BAD_TLS ? "tls" : "http";
		snprintf(c->name, sizeof(c->name), "%s", synth);
		conn_refuse_first(c, k);
		return;
	case SNIFF_OTHER:
		if (!short_wait && c->len == 0) {
			snprintf(c->rule, sizeof(c->rule), "deny (nothing sent within %u s)",
				 CONN_FIRST_MS / 1000);
			conn_audit(c, "deny");
			return;
		}
		if (is_synth)
			snprintf(c->name, sizeof(c->name), "%s", synth);
		if (c->len && conn_web_port(c->port)) {
			conn_refuse_other(c);
			return;
		}
		what = c->len ? CARRY_OTHER : CARRY_UNDECIDED;
		break;
	}
	if (what == CARRY_HTTP && conn_refuse_plain_cred(c))
		return;
	snprintf(host, sizeof(host), "%s", c->name[0] ? c->name : c->addr);
	err = conn_open_upstream(c, (struct sockaddr *)&c->orig);
	if (err < 0) {
		if (what == CARRY_HTTP)
			conn_say(c, err == -EACCES ? "403 Forbidden" : "502 Bad Gateway",
				 err == -EACCES ? c->rule : c->error);
		conn_audit(c, err == -EACCES ? "deny" : "error");
		return;
	}
	conn_serve_upstream(c, what, host);
}

/* What c->buf holds of an explicit proxy request: the head's length once whole, 0 while
 * it may still come, -EPROTO when its method is not one, -E2BIG when it fills the buffer. */
static int conn_head_state(const struct conn *c)
{
	const uint8_t *e = memmem(c->buf, c->len, "\r\n\r\n", 4);

	if (e)
		return (int)(e - c->buf) + 4;
	for (size_t i = 0; i < c->len && c->buf[i] != ' '; i++) {
		if (c->buf[i] < 'A' || c->buf[i] > 'Z' || i > 16)
			return -EPROTO;
	}
	return c->len == sizeof(c->buf) ? -E2BIG : 0;
}

/* Read an HTTP request head on the explicit listener until c->deadline_ms; its length or
 * -errno. */
static int conn_read_head(struct conn *c)
{
	for (;;) {
		int head = conn_head_state(c);
		uint64_t now = now_ms();
		struct pollfd pfd = {.fd = c->cfd, .events = POLLIN};
		ssize_t n;

		if (head != 0)
			return head;
		if (now >= c->deadline_ms || poll(&pfd, 1, (int)(c->deadline_ms - now)) <= 0)
			return -ETIMEDOUT;
		n = recv(c->cfd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		c->len += (size_t)n;
	}
}

/* CONNECT host:port: decide, connect, 200, then the tunnel, checked like a transparent
 * connection: a ClientHello in it must name the CONNECT host, and so must every HTTP request
 * (http_relay); malformed or stalled first bytes are refused, only bytes that are positively
 * something else go raw. */
static void conn_connect_tunnel(struct conn *c, const char *target, size_t head)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	char host[NAME_MAX_TEXT], sni[NAME_MAX_TEXT] = "";
	struct sockaddr_storage raw;
	socklen_t rawlen;
	enum sniff_kind k;
	enum conn_carry what;
	bool cred, web;
	int err;

	c->proto = "connect";
	if (sniff_split_hostport(target, strlen(target), host, sizeof(host), 0, &c->port) < 0 ||
	    c->port == 0) {
		snprintf(c->rule, sizeof(c->rule), "deny (bad CONNECT target)");
		conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
		return;
	}
	if (netpol_hostport_parse(host, c->port, &raw, &rawlen) < 0 &&
	    !netpol_name_norm(host, c->name, sizeof(c->name))) {
		snprintf(c->rule, sizeof(c->rule), "deny (bad CONNECT host)");
		conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
		return;
	}
	err = conn_open_upstream(c, (struct sockaddr *)&raw);
	if (err < 0) {
		conn_say(c, err == -EACCES ? "403 Forbidden" : "502 Bad Gateway",
			 err == -EACCES ? c->rule : c->error);
		conn_audit(c, err == -EACCES ? "deny" : "error");
		return;
	}
	if (write_all(c->cfd, ok, sizeof(ok) - 1) < 0)
		return;
	memmove(c->buf, c->buf + head, c->len - head);
	c->len -= head;
	cred = c->name[0] && policy_find_cred(c->px->pol, c->name);
	/* The tunnel's first bytes go through the gate a transparent connection's go through.
	 * Web ports and credentialed hosts wait for them; elsewhere a server may speak first. */
	web = c->port == 80 || c->port == 443 || cred;
	k = conn_read_first(c, web ? CONN_FIRST_MS : CONN_SERVER_FIRST_MS, sni, sizeof(sni));
	if (k == SNIFF_MORE && c->len > 0 && c->buf[0] == 22)
		k = SNIFF_BAD_TLS;
	if (k == SNIFF_BAD_TLS || k == SNIFF_BAD_HTTP || (k == SNIFF_MORE && c->len > 0)) {
		conn_refuse_first(c, k);
		return;
	}
	if (k == SNIFF_OTHER && c->len && conn_web_port(c->port)) {
		conn_refuse_other(c);
		return;
	}
	if (k == SNIFF_TLS && sni[0] && c->name[0] && strcmp(sni, c->name)) {
		snprintf(c->rule, sizeof(c->rule), "deny (the SNI differs from the CONNECT host)");
		conn_audit(c, "deny");
		return;
	}
	if ((cred && k != SNIFF_TLS) || (web && k == SNIFF_MORE)) {
		snprintf(c->rule, sizeof(c->rule), "deny (%s)",
			 cred ? "credentialed host without TLS" : "nothing sent within 10 s");
		conn_audit(c, "deny");
		return;
	}
	what = k == SNIFF_TLS	 ? CARRY_TLS
	       : k == SNIFF_HTTP ? CARRY_HTTP
	       : c->len		 ? CARRY_OTHER
				 : CARRY_UNDECIDED;
	conn_serve_upstream(c, what, c->name[0] ? c->name : host);
}

/*
 * GET http://host[:port]/path: the head parsed strictly (an absolute-form request), decided by
 * the URI's host, then forwarded in origin form with Connection: close and the URI's Host
 * (http1_origin_head): what goes upstream is only what was parsed, and http_relay holds it and
 * every later request to that host. `method` and `target` (the lenient first look) are not
 * used past the choice of this path.
 */
static void conn_absolute(struct conn *c, const char *method, const char *target, size_t head)
{
	struct http1_head *h = malloc(sizeof(*h));
	const char *reason = NULL, *auth, *path;
	char host[NAME_MAX_TEXT], *req = NULL;
	size_t hl, alen, plen, o;
	struct sockaddr_storage raw;
	socklen_t rawlen;
	int err, status = 400;

	(void)method;
	(void)target;
	c->proto = "http";
	if (!h) {
		c->error = "out of memory";
		conn_audit(c, "error");
		goto out;
	}
	if (http1_head_find((const char *)c->buf, c->len, CONN_PEEK_MAX, &hl, &reason) != 0 ||
	    hl != head ||
	    http1_parse_proxy_request((const char *)c->buf, hl, h, &status, &reason) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny (malformed HTTP request: %s)",
			 reason ? reason : "head not found");
		conn_say(c,
			 status == 501	 ? "501 Not Implemented"
			 : status == 417 ? "417 Expectation Failed"
					 : "400 Bad Request",
			 c->rule);
		conn_audit(c, "deny");
		goto out;
	}
	auth = h->target + 7;
	path = memchr(auth, '/', h->target_len - 7);
	alen = path ? (size_t)(path - auth) : h->target_len - 7;
	plen = path ? h->target_len - 7 - alen : 0;
	if (sniff_split_hostport(auth, alen, host, sizeof(host), 80, &c->port) < 0 ||
	    (netpol_hostport_parse(host, c->port, &raw, &rawlen) < 0 &&
	     !netpol_name_norm(host, c->name, sizeof(c->name)))) {
		snprintf(c->rule, sizeof(c->rule), "deny (bad request URI)");
		conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
		goto out;
	}
	if (conn_refuse_plain_cred(c))
		goto out;
	if (c->name[0])
		snprintf(host, sizeof(host), "%s", c->name);
	err = conn_open_upstream(c, (struct sockaddr *)&raw);
	if (err < 0) {
		conn_say(c, err == -EACCES ? "403 Forbidden" : "502 Bad Gateway",
			 err == -EACCES ? c->rule : c->error);
		conn_audit(c, err == -EACCES ? "deny" : "error");
		goto out;
	}
	req = malloc(CONN_PEEK_MAX);
	if (!req) {
		c->error = "out of memory";
		conn_audit(c, "error");
		goto out;
	}
	/* The body bytes that came with the head follow it. */
	if (http1_origin_head(h, auth, alen, path ? path : "/", path ? plen : 1, req, CONN_PEEK_MAX,
			      &o) < 0 ||
	    o + c->len - hl > CONN_PEEK_MAX) {
		snprintf(c->rule, sizeof(c->rule), "deny (request head too large)");
		conn_say(c, "431 Request Header Fields Too Large", c->rule);
		conn_audit(c, "deny");
		goto out;
	}
	memcpy(req + o, c->buf + hl, c->len - hl);
	o += c->len - hl;
	memcpy(c->buf, req, o);
	c->len = o;
	conn_serve_upstream(c, CARRY_HTTP, host);
out:
	free(req);
	free(h);
}

static void conn_explicit(struct conn *c)
{
	char method[17], target[2048];
	int head = conn_read_head(c);

	c->proto = "http";
	if (head < 0 || sniff_request_line(c->buf, (size_t)head, method, sizeof(method), target,
					   sizeof(target)) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny (%s)",
			 head == -ETIMEDOUT    ? "no request within 10 s"
			 : head == -ECONNRESET ? "closed before a request"
					       : "not an HTTP proxy request");
		if (head != -ETIMEDOUT && head != -ECONNRESET)
			conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
		return;
	}
	if (strcmp(method, "CONNECT") == 0)
		conn_connect_tunnel(c, target, (size_t)head);
	else if (strncasecmp(target, "http://", 7) == 0)
		conn_absolute(c, method, target, (size_t)head);
	else {
		snprintf(c->rule, sizeof(c->rule), "deny (not a proxy request: %s)",
			 strncasecmp(target, "https://", 8) == 0 ? "use CONNECT for https"
								 : "origin-form target");
		conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
	}
}

/* A connection's end: its sockets closed, its memory freed. */
static void conn_free(struct conn *c)
{
	close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	free(c);
}

int conn_new(struct proxy *px, int fd, bool explicit, struct conn **out, uint64_t *deadline_ms)
{
	struct conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c) {
		struct audit_event ev = {.proto = explicit ? "http" : "tcp",
					 .decision = "deny",
					 .rule = "deny (out of memory)"};

		close(fd);
		audit_log(&ev);
		return -ENOMEM;
	}
	c->px = px;
	c->cfd = fd;
	c->ufd = -1;
	c->explicit = explicit;
	if (explicit) {
		c->proto = "http";
		c->deadline_ms = now_ms() + CONN_FIRST_MS;
	} else if ((err = conn_transparent_begin(c)) < 0) {
		conn_free(c);
		return err;
	}
	*out = c;
	*deadline_ms = c->deadline_ms;
	return 0;
}

int conn_take(struct conn *c, bool *eof)
{
	char name[NAME_MAX_TEXT];

	*eof = false;
	while (c->len < sizeof(c->buf)) {
		ssize_t n = recv(c->cfd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);

		if (n > 0) {
			c->len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		*eof = true; /* the end, or an error: nothing more will come */
		c->reset = n < 0;
		return 1;
	}
	if (c->len == sizeof(c->buf))
		return 1;
	if (c->explicit
		    ? conn_head_state(c) != 0
		    : c->len && sniff_classify(c->buf, c->len, name, sizeof(name)) != SNIFF_MORE)
		return 1;
	if (c->len && ++c->takes >= CONN_TAKES_MAX) {
		c->dribbled = true;
		return 1;
	}
	return 0;
}

_Static_assert(CONN_FIRST_MS == 10000, "conn_silent's rules say 10 s");

const char *conn_silent(const struct conn *c, bool eof)
{
	_Static_assert(CONN_TAKES_MAX == 64, "the rule says 64");

	if (c->dribbled)
		return "deny (first bytes in more than 64 reads)";
	if (c->reset)
		return "deny (reset before it was served)"; /* no upstream for a torn-down socket */
	if (c->len)
		return NULL;
	if (c->explicit)
		return eof ? "deny (closed before a request)" : "deny (no request within 10 s)";
	if (c->short_wait)
		return NULL; /* server-first: its server speaks first (after a half-close too) */
	return eof ? "deny (closed before sending)" : "deny (nothing sent within 10 s)";
}

void conn_refuse(struct conn *c, const char *rule)
{
	snprintf(c->rule, sizeof(c->rule), "%s", rule);
	if (c->explicit && c->len)
		conn_say(c, "503 Service Unavailable", c->rule);
	conn_audit(c, "deny");
	conn_free(c);
}

void conn_serve(struct conn *c)
{
	if (c->explicit)
		conn_explicit(c);
	else
		conn_transparent(c);
	conn_free(c);
}
