/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's TCP connections (docs/network.md "Decisions"): a thread each, at most CONN_MAX.
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
			 c->name, addrs, DNS_MAX_ADDRS, &n);
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

/* After the decision and the upstream connection: the interception or the relay. */
static void conn_serve_upstream(struct conn *c, bool tls)
{
	const struct pol_cred *cred = c->name[0] ? policy_find_cred(c->px->pol, c->name) : NULL;
	int err;

	if (cred && tls) {
		strncat(c->rule, " (credentials)", sizeof(c->rule) - strlen(c->rule) - 1);
		err = conn_mitm(c, cred);
	} else if (!tls && c->name[0] && !strcmp(c->proto, "http")) {
		/* Every request on the connection must name the host decided on. */
		const char *why;

		err = http_relay(c->cfd, c->ufd, c->buf, c->len, c->name, c->px->idle_ms,
				 c->px->pol->egress_bytes ? &c->px->budget : NULL, &c->up, &c->down,
				 &why);
		c->has_bytes = true;
		c->error = why;
		if (err == -EACCES) {
			conn_audit(c, "deny");
			return;
		}
	} else {
		err = conn_relay(c->cfd, c->ufd, c->buf, c->len, c->px->idle_ms,
				 c->px->pol->egress_bytes ? &c->px->budget : NULL, &c->up,
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

static void conn_transparent(struct conn *c)
{
	socklen_t ol = sizeof(c->orig);
	char synth[NAME_MAX_TEXT] = "", sniffed[NAME_MAX_TEXT] = "";
	enum sniff_kind k;
	bool is_synth, web, short_wait;
	int err;

	c->proto = "tcp";
	if (getsockopt(c->cfd, SOL_IP, SO_ORIGINAL_DST, &c->orig, &ol) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny (no original destination)");
		conn_audit(c, "deny");
		return;
	}
	c->port = ntohs(c->orig.sin_port);
	inet_ntop(AF_INET, &c->orig.sin_addr, c->addr, sizeof(c->addr));
	is_synth = (ntohl(c->orig.sin_addr.s_addr) & SYNTH_MASK) == SYNTH_NET;
	if (is_synth && dns_synth_name(c->px->dns, c->orig.sin_addr, synth, sizeof(synth)) < 0) {
		snprintf(c->rule, sizeof(c->rule), "deny unknown synthetic address %s", c->addr);
		conn_audit(c, "deny");
		return;
	}
	/* Server-first protocols (ssh, smtp) send nothing: wait for the client only briefly
	 * where the destination is known without its bytes. */
	web = c->port == 80 || c->port == 443;
	short_wait = !web && (is_synth || policy_check_addr(c->px->pol, (struct sockaddr *)&c->orig,
							    c->port, c->rule, sizeof(c->rule)));
	c->rule[0] = 0;
	k = conn_read_first(c, short_wait ? CONN_SERVER_FIRST_MS : CONN_FIRST_MS, sniffed,
			    sizeof(sniffed));
	if (k == SNIFF_MORE && c->len > 0 && c->buf[0] == 22)
		k = SNIFF_BAD_TLS; /* a ClientHello that never completed is not let through raw */
	switch (k) {
	case SNIFF_TLS:
		c->proto = "tls";
		snprintf(c->name, sizeof(c->name), "%s", sniffed[0] ? sniffed : synth);
		break;
	case SNIFF_HTTP:
		c->proto = "http";
		snprintf(c->name, sizeof(c->name), "%s", sniffed);
		break;
	case SNIFF_BAD_TLS:
	case SNIFF_BAD_HTTP:
		c->proto = k == SNIFF_BAD_TLS ? "tls" : "http";
		snprintf(c->name, sizeof(c->name), "%s", synth);
		snprintf(c->rule, sizeof(c->rule), "deny (malformed %s)",
			 k == SNIFF_BAD_TLS ? "TLS ClientHello" : "HTTP request");
		conn_audit(c, "deny");
		return;
	case SNIFF_MORE:
	case SNIFF_OTHER:
		if (is_synth) {
			snprintf(c->name, sizeof(c->name), "%s", synth);
		} else if (!short_wait && c->len == 0) {
			snprintf(c->rule, sizeof(c->rule), "deny (nothing sent within %u s)",
				 CONN_FIRST_MS / 1000);
			conn_audit(c, "deny");
			return;
		}
		break;
	}
	if (!strcmp(c->proto, "http") && conn_refuse_plain_cred(c))
		return;
	err = conn_open_upstream(c, (struct sockaddr *)&c->orig);
	if (err < 0) {
		if (!strcmp(c->proto, "http"))
			conn_say(c, err == -EACCES ? "403 Forbidden" : "502 Bad Gateway",
				 err == -EACCES ? c->rule : c->error);
		conn_audit(c, err == -EACCES ? "deny" : "error");
		return;
	}
	conn_serve_upstream(c, k == SNIFF_TLS);
}

/* Read an HTTP request head on the explicit listener; its length or -errno. */
static int conn_read_head(struct conn *c)
{
	uint64_t deadline = now_ms() + CONN_FIRST_MS;

	for (;;) {
		const uint8_t *e = memmem(c->buf, c->len, "\r\n\r\n", 4);
		uint64_t now = now_ms();
		struct pollfd pfd = {.fd = c->cfd, .events = POLLIN};
		ssize_t n;

		if (e)
			return (int)(e - c->buf) + 4;
		for (size_t i = 0; i < c->len && c->buf[i] != ' '; i++) {
			if (c->buf[i] < 'A' || c->buf[i] > 'Z' || i > 16)
				return -EPROTO;
		}
		if (c->len == sizeof(c->buf))
			return -E2BIG;
		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) <= 0)
			return -ETIMEDOUT;
		n = recv(c->cfd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		c->len += (size_t)n;
	}
}

/* CONNECT host:port: decide, connect, 200, then the tunnel (checked like a transparent one:
 * a ClientHello in it must name the CONNECT host). */
static void conn_connect_tunnel(struct conn *c, const char *target, size_t head)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	char host[NAME_MAX_TEXT], sni[NAME_MAX_TEXT] = "";
	struct sockaddr_storage raw;
	socklen_t rawlen;
	enum sniff_kind k;
	bool cred;
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
	k = conn_read_first(c, c->port == 443 || cred ? CONN_FIRST_MS : CONN_SERVER_FIRST_MS, sni,
			    sizeof(sni));
	if (k == SNIFF_MORE && c->len > 0 && c->buf[0] == 22)
		k = SNIFF_BAD_TLS;
	if (k == SNIFF_BAD_TLS ||
	    (k == SNIFF_TLS && sni[0] && c->name[0] && strcmp(sni, c->name))) {
		snprintf(c->rule, sizeof(c->rule), "deny (%s)",
			 k == SNIFF_BAD_TLS ? "malformed TLS ClientHello"
					    : "the SNI differs from the CONNECT host");
		conn_audit(c, "deny");
		return;
	}
	if (cred && k != SNIFF_TLS) {
		snprintf(c->rule, sizeof(c->rule), "deny credentialed host without TLS");
		conn_audit(c, "deny");
		return;
	}
	conn_serve_upstream(c, k == SNIFF_TLS);
}

/* Copy the head's header lines but the hop-by-hop and Host ones into `out`. */
static size_t conn_copy_headers(const uint8_t *head, size_t hlen, char *out, size_t outlen)
{
	static const char *drop[] = {
		"host:", "connection:", "proxy-connection:", "keep-alive:", "proxy-authorization:",
		"te:",	 "upgrade:"};
	const char *line = memchr(head, '\n', hlen), *end = (const char *)head + hlen - 2;
	size_t o = 0;

	for (line = line ? line + 1 : end; line < end;) {
		const char *eol = memmem(line, (size_t)(end - line) + 2, "\r\n", 2);
		size_t ll = (size_t)(eol - line) + 2;
		bool keep = true;

		for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
			if (strncasecmp(line, drop[i], strlen(drop[i])) == 0)
				keep = false;
		}
		if (keep && o + ll < outlen) {
			memcpy(out + o, line, ll);
			o += ll;
		}
		line = eol + 2;
	}
	return o;
}

/* GET http://host[:port]/path: decide, then forward in origin form with one request per
 * connection (Connection: close), Host set from the URI. */
static void conn_absolute(struct conn *c, const char *method, const char *target, size_t head)
{
	const char *auth = target + 7, *path = strchr(auth, '/');
	char host[NAME_MAX_TEXT], *req;
	size_t alen = path ? (size_t)(path - auth) : strlen(auth), o;
	struct sockaddr_storage raw;
	socklen_t rawlen;
	bool http10 = memmem(c->buf, head, "HTTP/1.0\r\n", 10) != NULL;
	int err;

	c->proto = "http";
	if (sniff_split_hostport(auth, alen, host, sizeof(host), 80, &c->port) < 0 ||
	    (netpol_hostport_parse(host, c->port, &raw, &rawlen) < 0 &&
	     !netpol_name_norm(host, c->name, sizeof(c->name)))) {
		snprintf(c->rule, sizeof(c->rule), "deny (bad request URI)");
		conn_say(c, "400 Bad Request", c->rule);
		conn_audit(c, "deny");
		return;
	}
	if (conn_refuse_plain_cred(c))
		return;
	err = conn_open_upstream(c, (struct sockaddr *)&raw);
	if (err < 0) {
		conn_say(c, err == -EACCES ? "403 Forbidden" : "502 Bad Gateway",
			 err == -EACCES ? c->rule : c->error);
		conn_audit(c, err == -EACCES ? "deny" : "error");
		return;
	}
	req = malloc(CONN_PEEK_MAX + 4096);
	if (!req)
		return;
	o = (size_t)snprintf(req, 4096, "%s %s HTTP/1.%c\r\nHost: %.*s\r\nConnection: close\r\n",
			     method, path ? path : "/", http10 ? '0' : '1', (int)alen, auth);
	o += conn_copy_headers(c->buf, head, req + o, CONN_PEEK_MAX + 4096 - o - 2);
	memcpy(req + o, "\r\n", 2);
	o += 2;
	/* The body bytes that came with the head follow it. */
	if (o + c->len - head <= CONN_PEEK_MAX) {
		memcpy(req + o, c->buf + head, c->len - head);
		o += c->len - head;
		memcpy(c->buf, req, o);
		c->len = o;
		conn_serve_upstream(c, false);
	} else {
		snprintf(c->rule, sizeof(c->rule), "deny (request head too large)");
		conn_say(c, "431 Request Header Fields Too Large", c->rule);
		conn_audit(c, "deny");
	}
	free(req);
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

struct conn_start {
	struct conn *c;
	bool explicit;
};

static void *conn_thread(void *arg)
{
	struct conn_start *s = arg;
	struct conn *c = s->c;

	if (s->explicit)
		conn_explicit(c);
	else
		conn_transparent(c);
	close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	atomic_fetch_sub(&c->px->nconns, 1);
	free(c);
	free(s);
	return NULL;
}

void *conn_accept_loop(void *arg)
{
	struct conn_listener *l = arg;
	struct proxy *px = l->px;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		struct conn_start *s;
		struct conn *c;
		pthread_t t;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(10000);
			continue;
		}
		if (atomic_fetch_add(&px->nconns, 1) >= CONN_MAX) {
			struct audit_event ev = {.proto = l->explicit ? "http" : "tcp",
						 .decision = "deny",
						 .rule = "deny (too many connections: 512)"};

			atomic_fetch_sub(&px->nconns, 1);
			close(fd);
			audit_log(&ev);
			continue;
		}
		c = calloc(1, sizeof(*c));
		s = calloc(1, sizeof(*s));
		if (!c || !s) {
			free(c);
			free(s);
			close(fd);
			atomic_fetch_sub(&px->nconns, 1);
			continue;
		}
		c->px = px;
		c->cfd = fd;
		c->ufd = -1;
		s->c = c;
		s->explicit = l->explicit;
		if (pthread_create(&t, &attr, conn_thread, s) != 0) {
			close(fd);
			free(c);
			free(s);
			atomic_fetch_sub(&px->nconns, 1);
		}
	}
	return NULL;
}
