/* SPDX-License-Identifier: Apache-2.0 */
/* proxy/sniff.c: the SNI of real ClientHellos (OpenSSL's, cut into records and reads) and of
 * hostile ones; the Host of HTTP request heads. */
#include <criterion/criterion.h>
#include <errno.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

static unsigned sniff_get16_be(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* A real ClientHello from OpenSSL for `sni` (NULL: none); its length. */
static size_t real_hello(const char *sni, uint8_t *out, size_t max)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int n;

	SSL_set_bio(ssl, rb, wb);
	if (sni)
		SSL_set_tlsext_host_name(ssl, sni);
	SSL_set_connect_state(ssl);
	SSL_do_handshake(ssl);
	n = BIO_read(wb, out, (int)max);
	cr_assert_gt(n, 100);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

Test(sniff, real_hello_every_cut)
{
	uint8_t h[4096];
	size_t n = real_hello("A.Example.Test", h, sizeof(h));
	char name[NAME_MAX_TEXT];

	cr_assert_eq(sniff_classify(h, n, name, sizeof(name)), SNIFF_TLS);
	cr_assert_str_eq(name, "a.example.test");
	/* Every prefix is "more", never a wrong answer or an overread (ASan). */
	for (size_t cut = 1; cut < n; cut++) {
		uint8_t *p = malloc(cut);

		memcpy(p, h, cut);
		cr_assert_eq(sniff_classify(p, cut, name, sizeof(name)), SNIFF_MORE, "cut %zu",
			     cut);
		free(p);
	}
	n = real_hello(NULL, h, sizeof(h));
	cr_assert_eq(sniff_classify(h, n, name, sizeof(name)), SNIFF_TLS);
	cr_assert_str_eq(name, "");
}

Test(sniff, hello_split_into_records)
{
	uint8_t h[4096], r[8192];
	size_t n = real_hello("a.example.test", h, sizeof(h)), body = n - 5, o = 0;
	char name[NAME_MAX_TEXT];

	/* The same handshake in records of 7 bytes each. */
	for (size_t off = 0; off < body; off += 7) {
		size_t l = body - off < 7 ? body - off : 7;

		r[o++] = 22;
		r[o++] = 3;
		r[o++] = 1;
		r[o++] = 0;
		r[o++] = (uint8_t)l;
		memcpy(r + o, h + 5 + off, l);
		o += l;
	}
	cr_assert_eq(sniff_tls(r, o, name, sizeof(name)), SNIFF_TLS);
	cr_assert_str_eq(name, "a.example.test");
	cr_assert_eq(sniff_tls(r, o - 3, name, sizeof(name)), SNIFF_MORE);
	/* An alert record in the middle. */
	r[12] = 21;
	cr_assert_eq(sniff_tls(r, o, name, sizeof(name)), SNIFF_BAD_TLS);
}

Test(sniff, hostile_hellos)
{
	uint8_t h[4096];
	size_t n = real_hello("a.example.test", h, sizeof(h));
	char name[NAME_MAX_TEXT];
	uint8_t *sni = memmem(h, n, "a.example.test", 14);
	uint8_t b[4096];

	cr_assert(sni);
	/* The SNI's name length past its extension. */
	memcpy(b, h, n);
	b[sni - h - 1] = 0xff;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	/* The handshake claims 16 MiB. */
	memcpy(b, h, n);
	b[6] = 0xff;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	/* A record over 16 KiB, a record of 0 bytes, not version 3. */
	memcpy(b, h, n);
	b[3] = 0x50;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	memcpy(b, h, n);
	b[3] = 0;
	b[4] = 0;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	memcpy(b, h, n);
	b[1] = 2;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	/* A ServerHello, a name with a NUL or a slash in it. */
	memcpy(b, h, n);
	b[5] = 2;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	memcpy(b, h, n);
	b[sni - h + 1] = 0;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	memcpy(b, h, n);
	b[sni - h + 1] = '/';
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	/* The extensions' length one more than there is. */
	{
		static const uint8_t tiny[] = {
			22, 3, 1,    0,	   46, 1, 0, 0, 42, 3, 3, [10 + 32] = 0,
			0,  2, 0x13, 0x01, 1,  0, 0, 5};

		cr_assert_eq(sniff_tls(tiny, sizeof(tiny), name, sizeof(name)), SNIFF_BAD_TLS);
	}
	/* An encrypted ClientHello (the SNI extension retyped as ECH): its SNI would be only
	 * the outer name. */
	memcpy(b, h, n);
	cr_assert_eq(sniff_get16_be(b + (sni - h) - 9), 0);
	b[sni - h - 9] = 0xfe;
	b[sni - h - 8] = 0x0d;
	cr_assert_eq(sniff_tls(b, n, name, sizeof(name)), SNIFF_BAD_TLS);
	/* Not TLS at all. */
	cr_assert_eq(sniff_tls((const uint8_t *)"SSH-2.0", 7, name, sizeof(name)), SNIFF_OTHER);
}

static enum sniff_kind http(const char *s, char *name)
{
	return sniff_classify((const uint8_t *)s, strlen(s), name, NAME_MAX_TEXT);
}

Test(sniff, http_host)
{
	char name[NAME_MAX_TEXT];
	uint16_t port;
	char host[64];

	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: A.Example.Test:8080\r\n\r\n", name), SNIFF_HTTP);
	cr_assert_str_eq(name, "a.example.test");
	cr_assert_eq(http("GET / HTTP/1.1\r\nUser-Agent: x\r\nhost:  b.test.  \r\n\r\n", name),
		     SNIFF_HTTP);
	cr_assert_str_eq(name, "b.test");
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", name), SNIFF_HTTP);
	cr_assert_str_eq(name, "2001:db8::1");
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: a.test\r\n", name), SNIFF_MORE);
	cr_assert_eq(http("GE", name), SNIFF_MORE);
	/* An attempt at HTTP that does not parse strictly is refused, never "other" (issue 29). */
	cr_assert_eq(http("get / HTTP/1.1\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/1.1\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", name),
		     SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/2.0\r\nHost: a.test\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: a.test:99999\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(http("GET /\x01 HTTP/1.1\r\nHost: a.test\r\n\r\n", name), SNIFF_BAD_HTTP);
	cr_assert_eq(sniff_split_hostport("a.test:443", 10, host, sizeof(host), 80, &port), 0);
	cr_assert_eq(port, 443);
	cr_assert_eq(sniff_split_hostport("a.test", 6, host, sizeof(host), 80, &port), 0);
	cr_assert_eq(port, 80);
	cr_assert_eq(sniff_split_hostport("[::1", 4, host, sizeof(host), 80, &port), -EINVAL);
	cr_assert_eq(sniff_split_hostport("a:b:c", 5, host, sizeof(host), 80, &port), -EINVAL);
}

/* Issue 29: every way a lenient server could still read a request in the first bytes is an
 * attempt at HTTP, decided by the strict parser: refused when it does not parse, undecided
 * (never "other", never relayed raw) while it may still come. */
Test(sniff, maybe_http_is_never_other)
{
	static const char *const refused[] = {
		"get / HTTP/1.1\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"\nGET / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"GET / HTTP/1.1\nHost: denied.test\n\n",
		"GET / HTTP/1.1\r\nHost: a.test\nHost: denied.test\r\n\r\n",
		"GET\t/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"GET / http/1.1\r\nHost: denied.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nX: y\r\n z\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : a.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n",
		"GET http://denied.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"GET /\r\n\r\n",
		"FOO / HTTP/1.1\r\n\r\n",
		/* HTTP/0.9 with an absolute URI: servers pick the site from it (any scheme) */
		"GET http://denied.test/h1\r\n\r\n",
		"GET x://denied.test/\r\n\r\n",
		"post HTTP://denied.test/\r\n\r\n",
		"OPTIONS *\r\n\r\n",
		/* a framing field a CGI/Rack server reads with '_' as '-' */
		"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer_Encoding: chunked\r\n"
		"Content-Length: 5\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n"
		"content_length: 5\r\n\r\n",
		/* a PROXY-protocol header before a request (its listener drops it) */
		"PROXY TCP4 10.0.0.1 10.0.0.2 1234 80\r\nGET / HTTP/1.1\r\nHost: "
		"denied.test\r\n\r\n",
		"proxy UNKNOWN\r\nGET / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
	};
	static const char *const undecided[] = {
		"\r\n",
		"\r\n\r\n\r\n",
		"get",
		"get ",
		"get /",
		"gEt / HTTP/1.1\r\nHost: a.test\r\n",
		"POST /x HTTP/1.1\r\nHost: a.test\r\n",
		"FOO /x HT",
		"x ",
		"GET http://denied.test/h1\r\n",
		"GET htt",
		"GET http:/",
		"PROX",
	};
	static const char *const other[] = {
		"SSH-2.0-OpenSSH_9.6\r\n",
		"SSH-2.0-OpenSSH_9.6 Ubuntu-3ubuntu13\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"QUIT\r\n",
		"GET key\r\n",
		"get foo 0 0 1\r\n",
		"EHLO a.test\r\n",
		"{\"a\": 1}",
		"\x01\x02\x03",
	};
	/* Any token is a method to the strict parser: these are decided by their Host. */
	static const char *const by_host[] = {
		"get / HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"Get / HTTP/1.1\r\nhost: Denied.Test\r\n\r\n",
		"m-search / HTTP/1.0\r\nHost: denied.test:80\r\n\r\n",
	};
	char name[NAME_MAX_TEXT];

	for (size_t i = 0; i < sizeof(by_host) / sizeof(by_host[0]); i++) {
		cr_assert_eq(http(by_host[i], name), SNIFF_HTTP, "by_host[%zu]", i);
		cr_assert_str_eq(name, "denied.test");
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		cr_assert_eq(http(refused[i], name), SNIFF_BAD_HTTP, "refused[%zu]", i);
	for (size_t i = 0; i < sizeof(undecided) / sizeof(undecided[0]); i++)
		cr_assert_eq(http(undecided[i], name), SNIFF_MORE, "undecided[%zu]", i);
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		cr_assert_eq(http(other[i], name), SNIFF_OTHER, "other[%zu]", i);
	/* An undecided start that fills the first-bytes buffer is refused. */
	{
		uint8_t *b = malloc(CONN_PEEK_MAX);

		memset(b, 'a', CONN_PEEK_MAX);
		memcpy(b, "get /", 5);
		cr_assert_eq(sniff_classify(b, CONN_PEEK_MAX, name, sizeof(name)), SNIFF_BAD_HTTP);
		free(b);
	}
	cr_assert_eq(http("GET /a?b HTTP/1.0\r\nHost: A.test\r\n\r\n", name), SNIFF_HTTP);
	cr_assert_str_eq(name, "a.test");
	/* PROXY protocol v2's signature (a NUL in it), then a request: never relayed raw. */
	{
		static const uint8_t v2[] = "\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c"
					    "\x0a\x00\x00\x01\x0a\x00\x00\x02\x04\xd2\x00\x50"
					    "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n";

		cr_assert_neq(sniff_classify(v2, sizeof(v2) - 1, name, sizeof(name)), SNIFF_OTHER);
		cr_assert_neq(sniff_classify(v2, sizeof(v2) - 1, name, sizeof(name)), SNIFF_HTTP);
		cr_assert_eq(sniff_classify(v2, 7, name, sizeof(name)), SNIFF_MORE);
	}
}
