/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet http / https: the fake internet's web servers. HTTP/1.1 with keep-alive, one thread
 * per connection (fakenet_accept_loop). Every request's head is logged (the test's proof of
 * what reached the upstream server: an injected header, the Host) and, for any path but
 * /bytes/N and /status/N, sent back as the body. HTTPS picks its certificate by SNI.
 */
#include "fakenet.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX     16384 /* request line + headers */
#define HEADERS_MAX  100
#define REQUESTS_MAX 10000 /* per connection */
#define BYTES_MAX    (64ull << 30)
#define PATTERN_LEN  (4u << 20)
#define CERTS_MAX    32

struct http_server {
	bool tls;
	SSL_CTX *ctx[CERTS_MAX]; /* ctx[0] is the default; the SNI callback may switch */
	unsigned nctx;
	unsigned timeout_sec;
	int pattern_fd;	     /* memfd of PATTERN_LEN pattern bytes, for sendfile */
	const char *pattern; /* the same bytes mapped, for SSL_write */
};

struct hconn {
	int fd;
	SSL *ssl;
	const struct http_server *srv;
	char peer[32];
	char buf[HEAD_MAX];
	size_t start, end; /* unread bytes: buf[start..end) */
};

static ssize_t hconn_recv(struct hconn *c, void *buf, size_t len)
{
	if (c->ssl) {
		int n = SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);

		if (n > 0)
			return n;
		return SSL_get_error(c->ssl, n) == SSL_ERROR_ZERO_RETURN ? 0 : -EIO;
	}
	for (;;) {
		ssize_t n = recv(c->fd, buf, len, 0);

		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

static int hconn_send(struct hconn *c, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n;

		if (c->ssl) {
			int chunk = len > (1u << 20) ? (1 << 20) : (int)len;

			n = SSL_write(c->ssl, p, chunk);
			if (n <= 0)
				return -EIO;
		} else {
			n = send(c->fd, p, len, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Read more into buf (compacting first); bytes read, 0 at EOF, -ENOBUFS when full. */
static ssize_t hconn_fill(struct hconn *c)
{
	ssize_t n;

	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == sizeof(c->buf))
		return -ENOBUFS;
	n = hconn_recv(c, c->buf + c->end, sizeof(c->buf) - c->end);
	if (n > 0)
		c->end += n;
	return n;
}

/* The next line (without CR LF, NUL-terminated in place); NULL on EOF, error or overflow. */
static char *hconn_getline(struct hconn *c)
{
	for (;;) {
		char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);

		if (nl) {
			char *line = c->buf + c->start;

			c->start = nl + 1 - c->buf;
			if (nl > line && nl[-1] == '\r')
				nl--;
			*nl = 0;
			return line;
		}
		if (hconn_fill(c) <= 0)
			return NULL;
	}
}

/* Read and drop n body bytes. */
static int hconn_skip(struct hconn *c, uint64_t n)
{
	while (n > 0) {
		size_t have = c->end - c->start;

		if (have == 0) {
			ssize_t r = hconn_fill(c);

			if (r <= 0)
				return r < 0 ? (int)r : -EPIPE;
			continue;
		}
		if (have > n)
			have = n;
		c->start += have;
		n -= have;
	}
	return 0;
}

/* A chunked body, read and dropped; its decoded length in *len. */
static int hconn_skip_chunked(struct hconn *c, uint64_t *len)
{
	*len = 0;
	for (;;) {
		char *line = hconn_getline(c), *end;
		unsigned long long n;

		if (!line)
			return -EPROTO;
		errno = 0;
		n = strtoull(line, &end, 16);
		if (errno || end == line || (*end && *end != ';' && *end != ' ') || n > BYTES_MAX)
			return -EPROTO;
		if (n == 0)
			break;
		if (hconn_skip(c, n))
			return -EPROTO;
		line = hconn_getline(c);
		if (!line || *line)
			return -EPROTO;
		*len += n;
	}
	for (;;) { /* trailers, up to the empty line */
		char *line = hconn_getline(c);

		if (!line)
			return -EPROTO;
		if (!*line)
			return 0;
	}
}

static const char *status_text(unsigned status)
{
	switch (status) {
	case 200:
		return "OK";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 413:
		return "Payload Too Large";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	default:
		return "Status";
	}
}

static int hconn_respond_head(struct hconn *c, unsigned status, const char *type, uint64_t body_len,
			      bool close_after)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %u %s\r\nServer: fakenet\r\nContent-Type: %s\r\n"
			 "Content-Length: %llu\r\nConnection: %s\r\n\r\n",
			 status, status_text(status), type, (unsigned long long)body_len,
			 close_after ? "close" : "keep-alive");

	return hconn_send(c, head, n);
}

static int hconn_respond(struct hconn *c, unsigned status, const char *body, size_t len,
			 bool head_only, bool close_after)
{
	int rc = hconn_respond_head(c, status, "text/plain", len, close_after);

	if (rc || head_only)
		return rc;
	return hconn_send(c, body, len);
}

/* N pattern bytes: sendfile from the memfd on plain TCP, large SSL_writes on TLS. */
static int hconn_send_bytes(struct hconn *c, uint64_t n)
{
	const struct http_server *srv = c->srv;

	while (n > 0) {
		size_t chunk = n > PATTERN_LEN ? PATTERN_LEN : n;

		if (c->ssl) {
			if (hconn_send(c, srv->pattern, chunk))
				return -EIO;
		} else {
			off_t off = 0;

			while (off < (off_t)chunk) {
				ssize_t s = sendfile(c->fd, srv->pattern_fd, &off, chunk - off);

				if (s < 0 && errno == EINTR)
					continue;
				if (s <= 0)
					return s < 0 ? -errno : -EIO;
			}
		}
		n -= chunk;
	}
	return 0;
}

/* Serve one request whose head starts at the next line; 1 to go on, 0 to close, <0 error. */
static int hconn_request(struct hconn *c, const char *sni)
{
	char echo[HEAD_MAX + 256], method[16], target[1024], version[16], *line;
	size_t elen = 0;
	unsigned nheaders = 0;
	bool has_cl = false, chunked = false, keep_alive, head_only, expect = false;
	unsigned long long content_len = 0;
	uint64_t body_len = 0;
	int rc;

	line = hconn_getline(c);
	while (line && !*line) /* tolerate empty lines between requests */
		line = hconn_getline(c);
	if (!line)
		return 0;
	if (sscanf(line, "%15s %1023s %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7)) {
		fakenet_log("--- %s %s bad request line", c->srv->tls ? "https" : "http", c->peer);
		hconn_respond(c, 400, "bad request line\n", 17, false, true);
		return 0;
	}
	keep_alive = strcmp(version, "HTTP/1.0") != 0;
	elen = snprintf(echo, sizeof(echo), "%s\n", line);
	for (;;) {
		char *colon, *val;

		line = hconn_getline(c);
		if (!line) {
			fakenet_log("--- %s %s head too large or cut",
				    c->srv->tls ? "https" : "http", c->peer);
			hconn_respond(c, 431, "head too large\n", 15, false, true);
			return 0;
		}
		if (!*line)
			break;
		if (++nheaders > HEADERS_MAX || elen + strlen(line) + 2 >= sizeof(echo)) {
			hconn_respond(c, 431, "too many headers\n", 17, false, true);
			return 0;
		}
		elen += snprintf(echo + elen, sizeof(echo) - elen, "%s\n", line);
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		for (val = colon + 1; *val == ' ' || *val == '\t'; val++)
			;
		if (!strcasecmp(line, "Content-Length")) {
			char *end;

			content_len = strtoull(val, &end, 10);
			has_cl = true;
			if (end == val || content_len > BYTES_MAX) {
				hconn_respond(c, 400, "bad content-length\n", 19, false, true);
				return 0;
			}
		} else if (!strcasecmp(line, "Transfer-Encoding")) {
			chunked = strcasestr(val, "chunked") != NULL;
		} else if (!strcasecmp(line, "Connection")) {
			if (strcasestr(val, "close"))
				keep_alive = false;
			else if (strcasestr(val, "keep-alive"))
				keep_alive = true;
		} else if (!strcasecmp(line, "Expect")) {
			expect = strcasestr(val, "100-continue") != NULL;
		}
	}
	{
		char hdr[512];
		int n = snprintf(hdr, sizeof(hdr), "--- %s %s%s%s\n",
				 c->srv->tls ? "https" : "http", c->peer, sni ? " sni " : "",
				 sni ? sni : "");

		/* One write: the separator line, the head, an empty line. */
		char logbuf[sizeof(hdr) + sizeof(echo) + 2];

		memcpy(logbuf, hdr, n);
		memcpy(logbuf + n, echo, elen);
		logbuf[n + elen] = '\n';
		fakenet_log_raw(logbuf, n + elen + 1);
	}
	if (expect && (has_cl || chunked) && hconn_send(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
		return -EIO;
	if (chunked) {
		rc = hconn_skip_chunked(c, &body_len);
	} else {
		rc = hconn_skip(c, content_len);
		body_len = content_len;
	}
	if (rc) {
		hconn_respond(c, 400, "bad body\n", 9, false, true);
		return 0;
	}
	if (has_cl || chunked)
		elen += snprintf(echo + elen, sizeof(echo) - elen, "Body-Length: %llu\n",
				 (unsigned long long)body_len);
	head_only = !strcmp(method, "HEAD");
	if (!strncmp(target, "/bytes/", 7)) {
		char *end;
		unsigned long long n = strtoull(target + 7, &end, 10);

		if (*end || end == target + 7 || n > BYTES_MAX)
			return hconn_respond(c, 400, "bad length\n", 11, head_only, !keep_alive)
				       ? -EIO
				       : keep_alive;
		if (hconn_respond_head(c, 200, "application/octet-stream", n, !keep_alive))
			return -EIO;
		if (!head_only && hconn_send_bytes(c, n))
			return -EIO;
		return keep_alive;
	}
	if (!strncmp(target, "/status/", 8)) {
		unsigned long s = strtoul(target + 8, NULL, 10);
		char body[32];
		int n;

		if (s < 200 || s > 599)
			s = 400;
		n = snprintf(body, sizeof(body), "status %lu\n", s);
		return hconn_respond(c, s, body, n, head_only, !keep_alive) ? -EIO : keep_alive;
	}
	return hconn_respond(c, 200, echo, elen, head_only, !keep_alive) ? -EIO : keep_alive;
}

static void http_serve(int fd, const struct sockaddr_in *peer, void *arg)
{
	const struct http_server *srv = arg;
	struct hconn *c = calloc(1, sizeof(*c));
	const char *sni = NULL;

	if (!c)
		return;
	c->fd = fd;
	c->srv = srv;
	fakenet_format_addr(peer, c->peer, sizeof(c->peer));
	if (srv->tls) {
		c->ssl = SSL_new(srv->ctx[0]);
		if (!c->ssl || !SSL_set_fd(c->ssl, fd) || SSL_accept(c->ssl) != 1) {
			unsigned long e = ERR_get_error();
			char msg[256] = "connection closed";

			if (e)
				ERR_error_string_n(e, msg, sizeof(msg));
			fakenet_log("--- https %s tls handshake failed: %s", c->peer, msg);
			ERR_clear_error();
			goto out;
		}
		sni = SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
	}
	for (unsigned i = 0; i < REQUESTS_MAX; i++)
		if (hconn_request(c, sni) <= 0)
			break;
	if (c->ssl)
		SSL_shutdown(c->ssl);
out:
	ERR_clear_error();
	SSL_free(c->ssl);
	free(c);
}

/* ALPN: http/1.1 if offered, else none. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned inlen, void *arg)
{
	for (unsigned i = 0; i < inlen; i += 1 + in[i]) {
		if (in[i] == 8 && i + 9 <= inlen && !memcmp(in + i + 1, "http/1.1", 8)) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/* SNI: switch to the first context whose certificate matches the name. */
static int sni_select(SSL *ssl, int *alert, void *arg)
{
	const struct http_server *srv = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

	if (!name)
		return SSL_TLSEXT_ERR_OK;
	for (unsigned i = 0; i < srv->nctx; i++) {
		X509 *cert = SSL_CTX_get0_certificate(srv->ctx[i]);

		if (cert && X509_check_host(cert, name, 0, 0, NULL) == 1) {
			if (i > 0)
				SSL_set_SSL_CTX(ssl, srv->ctx[i]);
			return SSL_TLSEXT_ERR_OK;
		}
	}
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *tls_ctx_new(const char *cert, const char *key)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		char msg[256];

		ERR_error_string_n(ERR_get_error(), msg, sizeof(msg));
		fakenet_err("https: cannot use %s / %s: %s", cert, key, msg);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	return ctx;
}

static int pattern_init(struct http_server *srv)
{
	char *p;
	int fd = memfd_create("fakenet-bytes", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, PATTERN_LEN))
		return -errno;
	p = mmap(NULL, PATTERN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* Lines of 64 bytes: letters, a newline; easy to look at, not compressible to nothing. */
	for (size_t i = 0; i < PATTERN_LEN; i++)
		p[i] = (i % 64 == 63) ? '\n' : (char)('a' + (i / 64 + i) % 26);
	srv->pattern_fd = fd;
	srv->pattern = p;
	return 0;
}

static int web_main(int argc, char **argv, bool tls)
{
	static struct http_server srv;
	struct fakenet_opts opts;
	const char *certs[CERTS_MAX], *keys[CERTS_MAX];
	unsigned ncert = 0, nkey = 0;
	int lfd, rc;

	fakenet_opts_init(&opts);
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		if (tls && !strcmp(argv[i], "--cert") && i + 1 < argc && ncert < CERTS_MAX) {
			certs[ncert++] = argv[++i];
		} else if (tls && !strcmp(argv[i], "--key") && i + 1 < argc && nkey < CERTS_MAX) {
			keys[nkey++] = argv[++i];
		} else {
			fakenet_err("%s: unknown argument: %s", argv[0], argv[i]);
			return 2;
		}
	}
	if (!opts.have_listen || (tls && (ncert == 0 || ncert != nkey))) {
		fakenet_err("%s: needs --listen IP:PORT%s", argv[0],
			    tls ? " and --cert PEM --key PEM pairs" : "");
		return 2;
	}
	srv.tls = tls;
	srv.timeout_sec = opts.timeout_sec;
	for (unsigned i = 0; i < ncert; i++) {
		srv.ctx[i] = tls_ctx_new(certs[i], keys[i]);
		if (!srv.ctx[i])
			return 1;
		SSL_CTX_set_tlsext_servername_callback(srv.ctx[i], sni_select);
		SSL_CTX_set_tlsext_servername_arg(srv.ctx[i], &srv);
		srv.nctx++;
	}
	rc = pattern_init(&srv);
	if (rc) {
		fakenet_err("%s: pattern buffer: %s", argv[0], strerror(-rc));
		return 1;
	}
	if (fakenet_start(&opts))
		return 1;
	lfd = fakenet_listen(&opts, SOCK_STREAM);
	if (lfd < 0 || fakenet_write_pidfile(&opts))
		return 1;
	rc = fakenet_accept_loop(lfd, opts.timeout_sec, http_serve, &srv);
	fakenet_err("%s: accept: %s", argv[0], strerror(-rc));
	return 1;
}

int http_main(int argc, char **argv)
{
	return web_main(argc, argv, false);
}

int https_main(int argc, char **argv)
{
	return web_main(argc, argv, true);
}
