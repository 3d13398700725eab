/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/ca.c, proxy/mitm.c and proxy/http1.c: the sandbox CA, and intercepted connections end
 * to end over socketpairs: a guest client (OpenSSL, trusting the sandbox CA) -> mitm_serve ->
 * a fake upstream TLS server whose leaf comes from a second test CA. No network at all.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "http1.h"
#include "mitm.h"

#define NAME "api.example.test"

static char dir[64];
static char path_buf[8][128];

static const char *tpath(int slot, const char *file)
{
	snprintf(path_buf[slot], sizeof(path_buf[slot]), "%s/%s", dir, file);
	return path_buf[slot];
}

static void tmpdir_setup(void)
{
	/* a peer that closed early must fail a write, not kill the test */
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/test-mitm.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void tmpdir_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static struct mitm_ca *ca_make(const char *label)
{
	char cert[128], key[128], err[256];
	struct mitm_ca *ca;

	snprintf(cert, sizeof(cert), "%s/%s.pem", dir, label);
	snprintf(key, sizeof(key), "%s/%s.key", dir, label);
	cr_assert_eq(mitm_ca_create(cert, key, label), 0);
	ca = mitm_ca_load(cert, key, err, sizeof(err));
	cr_assert_not_null(ca, "%s", err);
	return ca;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	chmod(path, mode);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[8192];
	int in = open(from, O_RDONLY);
	ssize_t n;

	cr_assert_geq(in, 0);
	n = read(in, buf, sizeof(buf) - 1);
	close(in);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	write_text(to, buf, mode);
}

TestSuite(ca, .init = tmpdir_setup, .fini = tmpdir_teardown);

Test(ca, create_load_and_bad_files)
{
	char err[256];
	struct stat st;
	struct mitm_ca *ca;

	cr_assert_eq(mitm_ca_create(tpath(0, "ca.pem"), tpath(1, "ca.key"), "t1"), 0);
	cr_assert_eq(stat(tpath(0, "ca.pem"), &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0644);
	cr_assert_eq(stat(tpath(1, "ca.key"), &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	ca = mitm_ca_load(tpath(0, "ca.pem"), tpath(1, "ca.key"), err, sizeof(err));
	cr_assert_not_null(ca, "%s", err);
	mitm_ca_free(ca);

	cr_assert_eq(mitm_ca_create(tpath(2, "x.pem"), tpath(3, "x.key"), "bad label"), -EINVAL);
	cr_assert_eq(mitm_ca_create(tpath(2, "x.pem"), tpath(3, "x.key"), ""), -EINVAL);

	/* missing */
	cr_assert_null(mitm_ca_load(tpath(2, "none.pem"), tpath(1, "ca.key"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "none.pem"), "%s", err);
	/* garbage certificate */
	write_text(tpath(2, "junk.pem"), "hello\n", 0644);
	cr_assert_null(mitm_ca_load(tpath(2, "junk.pem"), tpath(1, "ca.key"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "junk.pem: not a PEM certificate"), "%s", err);
	/* a key others can read */
	copy_file(tpath(1, "ca.key"), tpath(3, "open.key"), 0644);
	cr_assert_null(mitm_ca_load(tpath(0, "ca.pem"), tpath(3, "open.key"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "open.key: mode 0644"), "%s", err);
	/* another CA's key */
	cr_assert_eq(mitm_ca_create(tpath(4, "o.pem"), tpath(5, "o.key"), "other"), 0);
	cr_assert_null(mitm_ca_load(tpath(0, "ca.pem"), tpath(5, "o.key"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "o.key: not the key of"), "%s", err);
	/* a leaf is not a CA */
	ca = mitm_ca_load(tpath(0, "ca.pem"), tpath(1, "ca.key"), err, sizeof(err));
	cr_assert_not_null(ca);
	cr_assert_eq(
		mitm_ca_issue_files(ca, "leaf.test", tpath(6, "leaf.pem"), tpath(7, "leaf.key")),
		0);
	cr_assert_eq(stat(tpath(7, "leaf.key"), &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	mitm_ca_free(ca);
	cr_assert_null(mitm_ca_load(tpath(6, "leaf.pem"), tpath(7, "leaf.key"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "not a CA certificate"), "%s", err);
	/* no temporary file is left behind */
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ls %s | grep -q tmp", dir);
	cr_assert_neq(system(cmd), 0);
}

static X509 *read_cert(const char *path)
{
	FILE *f = fopen(path, "r");
	X509 *x;

	cr_assert_not_null(f);
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	cr_assert_not_null(x);
	return x;
}

static bool verifies(X509 *ca, X509 *leaf)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	bool ok;

	X509_STORE_add_cert(st, ca);
	X509_STORE_CTX_init(ctx, st, leaf, NULL);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	ok = X509_verify_cert(ctx) == 1;
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

Test(ca, leaf_verifies_and_is_cached)
{
	struct mitm_ca *ca = ca_make("leafs");
	X509 *ca_cert = read_cert(tpath(0, "leafs.pem")), *a, *b, *other, *ipc;
	EVP_PKEY *ka, *kb, *ko;

	cr_assert_eq(mitm_ca_leaf(ca, NAME, &a, &ka), 0);
	cr_assert(verifies(ca_cert, a));
	cr_assert_eq(X509_check_host(a, NAME, 0, 0, NULL), 1);
	cr_assert_neq(X509_check_host(a, "other.example.test", 0, 0, NULL), 1);
	cr_assert_eq(X509_check_private_key(a, ka), 1);
	cr_assert_eq(X509_check_ca(a), 0);
	/* the cache: the same leaf again, another for another name */
	cr_assert_eq(mitm_ca_leaf(ca, NAME, &b, &kb), 0);
	cr_assert_eq(a, b);
	cr_assert_eq(ka, kb);
	cr_assert_eq(mitm_ca_leaf(ca, "other.example.test", &other, &ko), 0);
	cr_assert_neq(a, other);
	X509_free(b);
	EVP_PKEY_free(kb);
	X509_free(other);
	EVP_PKEY_free(ko);
	/* names that are not host names */
	cr_assert_eq(mitm_ca_leaf(ca, "*.example.test", &b, &kb), -EINVAL);
	cr_assert_eq(mitm_ca_leaf(ca, "API.example.test", &b, &kb), -EINVAL);
	cr_assert_eq(mitm_ca_leaf(ca, "a..b", &b, &kb), -EINVAL);
	cr_assert_eq(mitm_ca_leaf(ca, "", &b, &kb), -EINVAL);
	cr_assert_eq(mitm_ca_leaf(ca, "a.test,DNS:b.test", &b, &kb), -EINVAL);
	/* an IPv4 literal gets an IP SAN too */
	cr_assert_eq(
		mitm_ca_issue_files(ca, "203.0.113.10", tpath(1, "ip.pem"), tpath(2, "ip.key")), 0);
	ipc = read_cert(tpath(1, "ip.pem"));
	cr_assert(verifies(ca_cert, ipc));
	cr_assert_eq(X509_check_ip_asc(ipc, "203.0.113.10", 0), 1);
	X509_free(ipc);
	X509_free(a);
	EVP_PKEY_free(ka);
	X509_free(ca_cert);
	mitm_ca_free(ca);
}

struct leaf_race {
	struct mitm_ca *ca;
	X509 *got;
};

static void *leaf_race_main(void *arg)
{
	struct leaf_race *lr = arg;
	EVP_PKEY *k;

	if (mitm_ca_leaf(lr->ca, "race.example.test", &lr->got, &k) == 0)
		EVP_PKEY_free(k);
	return NULL;
}

/* Threads asking for one name at once all get the one leaf. */
Test(ca, concurrent_lookups_make_one_leaf)
{
	struct mitm_ca *ca = ca_make("race");
	struct leaf_race lr[8];
	pthread_t t[8];

	for (int i = 0; i < 8; i++) {
		lr[i] = (struct leaf_race){.ca = ca};
		cr_assert_eq(pthread_create(&t[i], NULL, leaf_race_main, &lr[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 8; i++) {
		cr_assert_not_null(lr[i].got);
		cr_assert_eq(lr[i].got, lr[0].got);
	}
	for (int i = 0; i < 8; i++)
		X509_free(lr[i].got);
	mitm_ca_free(ca);
}

Test(http1, parsers)
{
	struct http1_head *h = calloc(1, sizeof(*h));
	const char *why = "";
	int status;
	uint64_t sz;
	size_t hl;

#define REQ(s) http1_parse_request(s, strlen(s), h, &status, &why)
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), -EPROTO);
	cr_assert_str_eq(why, "whitespace before colon");
	cr_assert_eq(REQ("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), -EPROTO);
	cr_assert_eq(REQ("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), -EPROTO);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), -EPROTO);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\n\r\n"), -EPROTO);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"), -EPROTO);
	cr_assert_eq(
		REQ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
		-EPROTO);
	cr_assert_eq(REQ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n"), -EPROTO);
	cr_assert_eq(
		REQ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1234567890123456789\r\n\r\n"),
		-EPROTO);
	cr_assert_eq(REQ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
		     -EPROTO);
	cr_assert_eq(REQ("POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
		     -EPROTO);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"), -EPROTO);
	cr_assert_eq(status, 417);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n"), -EPROTO);
	cr_assert_eq(status, 501);
	cr_assert_eq(REQ("GET / HTTP/1.0\r\nHost: a\r\n\r\n"), 0);
	cr_assert(h->close);
	cr_assert_eq(REQ("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n"), 0);
	cr_assert(h->close);
#undef REQ
	cr_assert_eq(http1_head_find("GET / HTTP/1.1\nHost: a\r\n\r\n", 26, 1000, &hl, &why),
		     -EPROTO);
	cr_assert_eq(http1_head_find("GET / HTTP/1.1\r\nHost: a\r\n", 25, 1000, &hl, &why),
		     -EAGAIN);

	cr_assert_eq(http1_chunk_size("1aF", 3, &sz), 0);
	cr_assert_eq(sz, 0x1af);
	cr_assert_eq(http1_chunk_size("10;ext=1", 8, &sz), 0);
	cr_assert_eq(sz, 16);
	cr_assert_eq(http1_chunk_size("ffffffffffffffffff", 18, &sz), -EPROTO);
	cr_assert_eq(http1_chunk_size("0x10", 4, &sz), -EPROTO);
	cr_assert_eq(http1_chunk_size("", 0, &sz), -EPROTO);
	cr_assert_eq(http1_chunk_size("-1", 2, &sz), -EPROTO);

	cr_assert(http1_host_matches("API.example.test.:443", 21, NAME));
	cr_assert(http1_host_matches("api.example.test", 16, NAME));
	cr_assert_not(http1_host_matches("api.example.test.evil", 21, NAME));
	cr_assert_not(http1_host_matches("api.example.test:x", 18, NAME));
	cr_assert_not(http1_host_matches("evil@api.example.test", 21, NAME));
	cr_assert_not(http1_host_matches("", 0, NAME));

	cr_assert_eq(http1_parse_response("HTTP/1.1 200\r\n\r\n", 16, h, &why), 0);
	cr_assert_eq(h->status, 200);
	cr_assert_eq(http1_parse_response("HTTP/1.1 20 OK\r\n\r\n", 18, h, &why), -EPROTO);
	free(h);
}

/* ---- end to end ---- */

struct fake_up {
	SSL_CTX *ctx;
	int fd;
	bool saw_bytes;
	char got[256 * 1024];
	size_t got_len;
	unsigned requests;
	const char *reply; /* NULL: a 200 with a small body */
	size_t big;	   /* else when nonzero: a 200 with this many bytes of body */
};

struct serve {
	struct mitm_ca *ca;
	SSL_CTX *up_ctx;
	int fd, up_fd;
	const struct mitm_rule *rule;
	unsigned idle_ms;
	_Atomic int64_t *budget;
	int rc;
	struct mitm_stats stats;
	const char *name;
};

struct rig {
	struct mitm_ca *ca, *up_ca;
	SSL_CTX *up_ctx, *client_ctx;
	int guest[2], up[2];
	pthread_t serve_thr, up_thr;
	struct serve s;
	struct fake_up *fu;
};

static const struct mitm_header rule_headers[] = {
	{"Authorization", "Bearer sk-SECRET-123"},
	{"X-Key", "k2"},
};
static const struct mitm_rule rule = {NAME, rule_headers, 2};

/* Does the head at p (len bytes in the fake server's buffer) end, with its body? */
static bool fake_request_done(const char *p, size_t len, size_t *used)
{
	const char *end = memmem(p, len, "\r\n\r\n", 4), *cl;
	size_t head;

	if (!end)
		return false;
	head = (size_t)(end - p) + 4;
	cl = memmem(p, head, "Content-Length: ", 16);
	if (cl) {
		size_t n = strtoul(cl + 16, NULL, 10);

		if (len < head + n)
			return false;
		*used = head + n;
		return true;
	}
	if (memmem(p, head, "Transfer-Encoding: chunked", 26)) {
		const char *z = memmem(p + head, len - head, "0\r\n\r\n", 5);

		if (!z)
			return false;
		*used = (size_t)(z - p) + 5;
		return true;
	}
	*used = head;
	return true;
}

static void *fake_up_main(void *arg)
{
	struct fake_up *fu = arg;
	struct pollfd p = {.fd = fu->fd, .events = POLLIN};
	char c;
	size_t done = 0;
	SSL *ssl;

	/* nothing at all arrives when mitm_serve refused before going upstream */
	if (poll(&p, 1, 10000) != 1 || recv(fu->fd, &c, 1, MSG_PEEK) != 1)
		return NULL;
	fu->saw_bytes = true;
	ssl = SSL_new(fu->ctx);
	SSL_set_fd(ssl, fu->fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	for (;;) {
		size_t used;
		int n = SSL_read(ssl, fu->got + fu->got_len,
				 (int)(sizeof(fu->got) - fu->got_len - 1));

		if (n <= 0)
			break;
		fu->got_len += (size_t)n;
		fu->got[fu->got_len] = '\0';
		while (fake_request_done(fu->got + done, fu->got_len - done, &used)) {
			const char *r =
				fu->reply ? fu->reply
					  : "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

			done += used;
			fu->requests++;
			if (fu->big) {
				static char zeros[65536];
				char head[128];
				size_t left = fu->big;

				snprintf(head, sizeof(head),
					 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", fu->big);
				SSL_write(ssl, head, (int)strlen(head));
				while (left > 0) {
					int k = left > sizeof(zeros) ? (int)sizeof(zeros)
								     : (int)left;

					if (SSL_write(ssl, zeros, k) != k)
						break;
					left -= (size_t)k;
				}
				continue;
			}
			SSL_write(ssl, r, (int)strlen(r));
		}
	}
out:
	SSL_free(ssl);
	return NULL;
}

static void *serve_main(void *arg)
{
	struct serve *s = arg;
	char peek[40];
	ssize_t n;

	/* what the proxy's accept loop does: read the ClientHello's start to find the SNI */
	n = recv(s->fd, peek, sizeof(peek), 0);
	if (n <= 0) {
		s->rc = -999;
		return NULL;
	}
	s->rc = mitm_serve(s->ca, s->up_ctx, s->fd, peek, (size_t)n, s->name, s->rule, s->up_fd,
			   s->idle_ms, s->budget, &s->stats);
	/* the caller closes: the guest and the fake upstream see the ends */
	close(s->fd);
	close(s->up_fd);
	return NULL;
}

/* up_signer: the CA that signs the fake upstream's leaf (rig->up_ca, or another one). */
static void rig_start(struct rig *r, bool trusted_upstream, unsigned idle_ms)
{
	char err[256];
	SSL_CTX *sctx;

	memset(r, 0, sizeof(*r));
	r->ca = ca_make("sbx");
	r->up_ca = ca_make("netfake");
	r->up_ctx = mitm_upstream_ctx(tpath(0, "netfake.pem"), err, sizeof(err));
	cr_assert_not_null(r->up_ctx, "%s", err);
	if (trusted_upstream) {
		cr_assert_eq(
			mitm_ca_issue_files(r->up_ca, NAME, tpath(1, "up.pem"), tpath(2, "up.key")),
			0);
	} else {
		/* the right name, from a CA upstream does not trust */
		cr_assert_eq(
			mitm_ca_issue_files(r->ca, NAME, tpath(1, "up.pem"), tpath(2, "up.key")),
			0);
	}
	sctx = SSL_CTX_new(TLS_server_method());
	cr_assert_eq(SSL_CTX_use_certificate_file(sctx, tpath(1, "up.pem"), SSL_FILETYPE_PEM), 1);
	cr_assert_eq(SSL_CTX_use_PrivateKey_file(sctx, tpath(2, "up.key"), SSL_FILETYPE_PEM), 1);

	r->client_ctx = SSL_CTX_new(TLS_client_method());
	cr_assert_eq(SSL_CTX_load_verify_file(r->client_ctx, tpath(3, "sbx.pem")), 1);
	SSL_CTX_set_verify(r->client_ctx, SSL_VERIFY_PEER, NULL);

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r->guest), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r->up), 0);
	r->fu = calloc(1, sizeof(*r->fu));
	r->fu->ctx = sctx;
	r->fu->fd = r->up[1];
	r->s = (struct serve){.ca = r->ca,
			      .up_ctx = r->up_ctx,
			      .fd = r->guest[1],
			      .up_fd = r->up[0],
			      .rule = &rule,
			      .idle_ms = idle_ms,
			      .name = NAME};
}

static void rig_go(struct rig *r)
{
	cr_assert_eq(pthread_create(&r->up_thr, NULL, fake_up_main, r->fu), 0);
	cr_assert_eq(pthread_create(&r->serve_thr, NULL, serve_main, &r->s), 0);
}

/* Wait for both threads; the fake upstream's record stays readable until rig_free. */
static void rig_stop(struct rig *r)
{
	pthread_join(r->serve_thr, NULL);
	pthread_join(r->up_thr, NULL);
	close(r->guest[0]);
	close(r->up[1]);
}

static void rig_free(struct rig *r)
{
	SSL_CTX_free(r->fu->ctx);
	free(r->fu);
	SSL_CTX_free(r->client_ctx);
	SSL_CTX_free(r->up_ctx);
	mitm_ca_free(r->ca);
	mitm_ca_free(r->up_ca);
}

/* The guest: a TLS client on its end of the socketpair; NULL when the handshake fails. */
static SSL *guest_connect(struct rig *r, const char *sni, const char *alpn, size_t alpn_len)
{
	struct timeval tv = {.tv_sec = 10};
	SSL *ssl = SSL_new(r->client_ctx);

	setsockopt(r->guest[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SSL_set_fd(ssl, r->guest[0]);
	SSL_set_tlsext_host_name(ssl, sni);
	SSL_set1_host(ssl, sni);
	if (alpn)
		SSL_set_alpn_protos(ssl, (const unsigned char *)alpn, (unsigned)alpn_len);
	if (SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

static void guest_send(SSL *ssl, const char *s)
{
	cr_assert_eq(SSL_write(ssl, s, (int)strlen(s)), (int)strlen(s));
}

/*
 * One guest connection: the requests sent (all at once), then every response read until the
 * proxy closes; the rig stopped. The caller checks r->s, r->fu and resp, then rig_free.
 */
static size_t run_guest(struct rig *r, const char *req, char *resp, size_t cap)
{
	size_t len = 0;
	SSL *ssl;

	rig_go(r);
	ssl = guest_connect(r, NAME, NULL, 0);
	cr_assert_not_null(ssl);
	guest_send(ssl, req);
	for (;;) {
		int n = SSL_read(ssl, resp + len, (int)(cap - len - 1));

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	resp[len] = '\0';
	SSL_free(ssl);
	rig_stop(r);
	return len;
}

TestSuite(mitm, .init = tmpdir_setup, .fini = tmpdir_teardown, .timeout = 30);

Test(mitm, upstream_sees_the_injected_header_in_place_of_the_guests)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r,
		  "GET /v1/models HTTP/1.1\r\nHost: api.example.test:443\r\n"
		  "Authorization: Bearer guest-fake\r\nx-key: a\r\nAUTHORIZATION: dup\r\n"
		  "Accept: */*\r\nConnection: close\r\n\r\n",
		  resp, sizeof(resp));
	cr_assert(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", resp);
	cr_assert_not_null(strstr(resp, "\r\n\r\nhello"));
	cr_assert_eq(r.s.rc, 0, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_eq(r.s.stats.requests, 1);
	cr_assert_gt(r.s.stats.bytes_up, 0);
	cr_assert_gt(r.s.stats.bytes_down, 0);
	const char *got = r.fu->got;
	cr_assert_eq(r.fu->requests, 1);
	cr_assert_not_null(strstr(got, "GET /v1/models HTTP/1.1\r\n"), "%s", got);
	cr_assert_not_null(strstr(got, "\r\nAuthorization: Bearer sk-SECRET-123\r\n"), "%s", got);
	cr_assert_not_null(strstr(got, "\r\nX-Key: k2\r\n"), "%s", got);
	cr_assert_null(strstr(got, "guest-fake"), "%s", got);
	cr_assert_null(strstr(got, "dup"), "%s", got);
	cr_assert_null(strstr(got, "x-key: a"), "%s", got);
	cr_assert_not_null(strstr(got, "Accept: */*\r\n"), "%s", got);
	cr_assert_not_null(strstr(got, "Host: api.example.test:443\r\n"), "%s", got);
	rig_free(&r);
}

Test(mitm, keep_alive_two_requests)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 1000);
	run_guest(&r,
		  "GET /1 HTTP/1.1\r\nHost: API.example.test.\r\n\r\n"
		  "GET /2 HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n",
		  resp, sizeof(resp));
	cr_assert_eq(r.s.rc, 0, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_eq(r.s.stats.requests, 2);
	cr_assert_eq(r.fu->requests, 2);
	cr_assert_not_null(strstr(r.fu->got, "GET /1 HTTP/1.1\r\n"));
	cr_assert_not_null(strstr(r.fu->got, "GET /2 HTTP/1.1\r\n"));
	/* two whole responses reached the guest */
	cr_assert_not_null(strstr(resp, "hello"));
	cr_assert_not_null(strstr(strstr(resp, "hello") + 5, "HTTP/1.1 200 OK"), "%s", resp);
	rig_free(&r);
}

Test(mitm, host_mismatch_is_refused_and_upstream_sees_nothing)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", resp, sizeof(resp));
	cr_assert(strncmp(resp, "HTTP/1.1 421 ", 13) == 0, "%s", resp);
	cr_assert_eq(r.s.rc, -EACCES);
	cr_assert_eq(r.fu->saw_bytes, false);
	cr_assert_eq(r.s.stats.bytes_up, 0);
	rig_free(&r);
}

Test(mitm, host_mismatch_on_a_second_request_gets_no_credentials)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r,
		  "GET /1 HTTP/1.1\r\nHost: api.example.test\r\n\r\n"
		  "GET /2 HTTP/1.1\r\nHost: api.example.test.evil\r\n\r\n",
		  resp, sizeof(resp));
	cr_assert_eq(r.s.rc, -EACCES);
	cr_assert_eq(r.fu->requests, 1);
	cr_assert_null(strstr(r.fu->got, "GET /2"));
	cr_assert_not_null(strstr(resp, "HTTP/1.1 421 "), "%s", resp);
	rig_free(&r);
}

Test(mitm, alpn_h2_and_http11_yields_http11_and_h2_alone_fails)
{
	const unsigned char *sel;
	unsigned sel_len;
	struct rig r;
	SSL *ssl;

	rig_start(&r, true, 1000);
	rig_go(&r);
	ssl = guest_connect(&r, NAME, "\x02h2\x08http/1.1", 12);
	cr_assert_not_null(ssl);
	SSL_get0_alpn_selected(ssl, &sel, &sel_len);
	cr_assert_eq(sel_len, 8);
	cr_assert(memcmp(sel, "http/1.1", 8) == 0);
	SSL_free(ssl);
	shutdown(r.guest[0], SHUT_WR);
	rig_stop(&r);
	rig_free(&r);

	rig_start(&r, true, 1000);
	rig_go(&r);
	cr_assert_null(guest_connect(&r, NAME, "\x02h2", 3));
	shutdown(r.guest[0], SHUT_WR);
	rig_stop(&r);
	cr_assert_lt(r.s.rc, 0);
	rig_free(&r);
}

Test(mitm, a_clienthello_for_another_name_is_refused)
{
	struct rig r;

	rig_start(&r, true, 1000);
	rig_go(&r);
	/* the guest trusts any name here: only the proxy can refuse */
	SSL_CTX_set_verify(r.client_ctx, SSL_VERIFY_NONE, NULL);
	SSL *ssl = guest_connect(&r, "other.example.test", NULL, 0);
	if (ssl) {
		char b[16];
		cr_assert_leq(SSL_read(ssl, b, sizeof(b)), 0);
		SSL_free(ssl);
	}
	shutdown(r.guest[0], SHUT_WR);
	rig_stop(&r);
	cr_assert_eq(r.s.rc, -EACCES, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_eq(r.fu->saw_bytes, false);
	rig_free(&r);
}

Test(mitm, chunked_bodies_are_relayed_both_ways)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	r.fu->reply = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		      "3;x=y\r\nabc\r\n0a\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
	run_guest(&r,
		  "POST /up HTTP/1.1\r\nHost: api.example.test\r\nTransfer-Encoding: chunked\r\n"
		  "Connection: close\r\n\r\n"
		  "5;ext=1\r\nhello\r\n000006\r\n world\r\n0\r\nTrailer-X: 1\r\n\r\n",
		  resp, sizeof(resp));
	cr_assert_eq(r.s.rc, 0, "%d %s", r.s.rc, r.s.stats.error);
	/* re-encoded: sizes afresh, the extension and the trailer dropped */
	cr_assert_not_null(strstr(r.fu->got, "\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
			   "%s", r.fu->got);
	cr_assert_null(strstr(r.fu->got, "Trailer-X"));
	cr_assert_not_null(strstr(resp, "\r\n\r\n3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n"), "%s",
			   resp);
	rig_free(&r);
}

Test(mitm, content_length_body_and_expect_continue)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r,
		  "PUT /x HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 11\r\n"
		  "Expect: 100-continue\r\nConnection: close\r\n\r\nhello world",
		  resp, sizeof(resp));
	cr_assert_eq(r.s.rc, 0, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert(strncmp(resp, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", 40) == 0, "%s",
		  resp);
	cr_assert_not_null(strstr(r.fu->got, "\r\n\r\nhello world"));
	cr_assert_null(strstr(r.fu->got, "Expect"));
	rig_free(&r);
}

static void malformed(const char *req, const char *status)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r, req, resp, sizeof(resp));
	cr_assert(strncmp(resp, status, strlen(status)) == 0, "%s -> %s", req, resp);
	cr_assert_eq(r.s.rc, -EPROTO, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_eq(r.fu->saw_bytes, false);
	rig_free(&r);
}

Test(mitm, malformed_requests_get_400_and_nothing_goes_upstream)
{
	static char big[20000];
	char *many = calloc(1, 200 * 16);

	malformed("POST / HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 5\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		  "HTTP/1.1 400 ");
	malformed("GET / HTTP/1.1\r\nHost: api.example.test\r\nX-A: a\r\n b\r\n\r\n",
		  "HTTP/1.1 400 ");
	malformed("GET / HTTP/1.1\nHost: api.example.test\r\n\r\n", "HTTP/1.1 400 ");
	malformed("GET / HTTP/1.1\r\nHost: api.example.test\r\nUpgrade: websocket\r\n\r\n",
		  "HTTP/1.1 501 ");
	malformed("TRACE / HTTP/1.1\r\nHost: api.example.test\r\n\r\n", "HTTP/1.1 501 ");
	snprintf(big, sizeof(big),
		 "GET / HTTP/1.1\r\nHost: api.example.test\r\nX-Big: %0*d\r\n\r\n", 17000, 0);
	malformed(big, "HTTP/1.1 400 ");
	strcpy(many, "GET / HTTP/1.1\r\nHost: api.example.test\r\n");
	for (int i = 0; i < 100; i++)
		sprintf(many + strlen(many), "X-%d: 1\r\n", i);
	strcat(many, "\r\n");
	malformed(many, "HTTP/1.1 400 ");
	free(many);
}

Test(mitm, a_malformed_chunk_size_closes_after_400)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	run_guest(&r,
		  "POST / HTTP/1.1\r\nHost: api.example.test\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "fffffffffffffffff\r\n",
		  resp, sizeof(resp));
	cr_assert_eq(r.s.rc, -EPROTO, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_not_null(strstr(resp, "HTTP/1.1 400 "), "%s", resp);
	rig_free(&r);
}

Test(mitm, an_untrusted_upstream_fails_the_connection)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, false, 5000);
	run_guest(&r, "GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n", resp, sizeof(resp));
	cr_assert(strncmp(resp, "HTTP/1.1 502 ", 13) == 0, "%s", resp);
	cr_assert_eq(r.s.rc, -EPROTO, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_not_null(strstr(r.s.stats.error, "upstream certificate"), "%s", r.s.stats.error);
	cr_assert_eq(r.fu->requests, 0);
	rig_free(&r);
}

Test(mitm, idle_timeout_fires)
{
	struct timespec t0, t1;
	struct rig r;
	SSL *ssl;
	long ms;

	rig_start(&r, true, 300);
	rig_go(&r);
	ssl = guest_connect(&r, NAME, NULL, 0);
	cr_assert_not_null(ssl);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_join(r.serve_thr, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	cr_assert_eq(r.s.rc, -ETIMEDOUT, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_not_null(strstr(r.s.stats.error, "idle timeout"));
	cr_assert(ms >= 250 && ms < 3000, "%ld ms", ms);
	SSL_free(ssl);
	pthread_join(r.up_thr, NULL);
	close(r.guest[0]);
	close(r.up[1]);
	rig_free(&r);
}

Test(mitm, egress_budget_stops_the_connection)
{
	static char resp[8192], req[8192];
	_Atomic int64_t budget = 3000;
	struct rig r;

	rig_start(&r, true, 5000);
	r.s.budget = &budget;
	snprintf(req, sizeof(req),
		 "POST / HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 5000\r\n\r\n%0*d",
		 5000, 0);
	run_guest(&r, req, resp, sizeof(resp));
	cr_assert_eq(r.s.rc, -EDQUOT, "%d %s", r.s.rc, r.s.stats.error);
	cr_assert_str_eq(r.s.stats.error, "egress budget exhausted");
	cr_assert_geq(budget, 0);
	cr_assert_leq(r.s.stats.bytes_up, 3000);
	cr_assert_eq(budget + (int64_t)r.s.stats.bytes_up, 3000);
	rig_free(&r);
}

Test(mitm, a_rule_value_with_a_newline_is_refused)
{
	static const struct mitm_header bad_h[] = {{"Authorization", "Bearer x\r\nX-Evil: 1"}};
	static const struct mitm_rule bad = {NAME, bad_h, 1};
	static const struct mitm_rule other = {"other.test", rule_headers, 2};
	static char resp[256];
	struct rig r;

	rig_start(&r, true, 1000);
	r.s.rule = &bad;
	rig_go(&r);
	/* refused before the handshake: the guest's ClientHello goes unanswered */
	cr_assert_null(guest_connect(&r, NAME, NULL, 0));
	rig_stop(&r);
	cr_assert_eq(r.s.rc, -EINVAL);
	rig_free(&r);

	rig_start(&r, true, 1000);
	r.s.rule = &other;
	rig_go(&r);
	cr_assert_null(guest_connect(&r, NAME, NULL, 0));
	rig_stop(&r);
	cr_assert_eq(r.s.rc, -EINVAL);
	cr_assert_not_null(strstr(r.s.stats.error, "another host"));
	rig_free(&r);
	(void)resp;
}

/* A large response relayed whole; its rate is logged (tests/unit is built with sanitizers). */
Test(mitm, a_large_response_is_relayed_whole)
{
	static char buf[65536];
	struct timespec t0, t1;
	size_t total = 0, body = 0;
	struct rig r;
	SSL *ssl;
	double s;

	rig_start(&r, true, 5000);
	r.fu->big = 64u << 20;
	rig_go(&r);
	ssl = guest_connect(&r, NAME, NULL, 0);
	cr_assert_not_null(ssl);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	guest_send(ssl, "GET /big HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n");
	for (;;) {
		int n = SSL_read(ssl, buf, sizeof(buf));

		if (n <= 0)
			break;
		total += (size_t)n;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	SSL_free(ssl);
	rig_stop(&r);
	cr_assert_eq(r.s.rc, 0, "%d %s", r.s.rc, r.s.stats.error);
	body = total - strlen("HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n");
	cr_assert_eq(body, r.fu->big);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_log_info("mitm relay: %zu MiB in %.3f s, %.0f MiB/s", body >> 20, s,
		    (double)(body >> 20) / s);
	rig_free(&r);
}

/* A response the strict parser refuses becomes a 502 for the guest. */
Test(mitm, a_malformed_response_gets_502)
{
	static char resp[8192];
	struct rig r;

	rig_start(&r, true, 5000);
	r.fu->reply = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
	run_guest(&r, "GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n", resp, sizeof(resp));
	cr_assert(strncmp(resp, "HTTP/1.1 502 ", 13) == 0, "%s", resp);
	cr_assert_eq(r.s.rc, -EPROTO);
	cr_assert_not_null(strstr(r.s.stats.error, "upstream: both"), "%s", r.s.stats.error);
	rig_free(&r);
}
