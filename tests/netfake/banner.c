/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fakenet banner: a server-first TCP service (the shape of ssh or SMTP: the server speaks
 * before the client), and fakenet client, a one-shot TCP or TLS client for tests that have no
 * curl (the emulated host) or want raw bytes.
 */
#include "fakenet.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINE_MAX_LEN 4096
#define LINES_MAX    100000

static int send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		p += n;
		len -= n;
	}
	return 0;
}

static void banner_serve(int fd, const struct sockaddr_in *peer, void *arg)
{
	const char *banner = arg;
	char addr[32], buf[LINE_MAX_LEN];
	size_t have = 0;
	unsigned lines = 0;
	const char *why = "closed by the client";

	fakenet_format_addr(peer, addr, sizeof(addr));
	fakenet_log("connect %s", addr);
	if (send_all(fd, banner, strlen(banner)) || send_all(fd, "\n", 1)) {
		why = "send failed";
		goto out;
	}
	while (lines < LINES_MAX) {
		ssize_t n = recv(fd, buf + have, sizeof(buf) - have, 0);
		char *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				why = errno == EAGAIN ? "idle timeout" : "recv failed";
			break;
		}
		have += n;
		while ((nl = memchr(buf, '\n', have))) {
			size_t l = nl + 1 - buf;

			if (send_all(fd, buf, l)) {
				why = "send failed";
				goto out;
			}
			lines++;
			memmove(buf, buf + l, have - l);
			have -= l;
		}
		if (have == sizeof(buf)) {
			why = "line too long";
			break;
		}
	}
out:
	fakenet_log("close %s lines=%u (%s)", addr, lines, why);
}

int banner_main(int argc, char **argv)
{
	struct fakenet_opts opts;
	const char *banner = NULL;
	int lfd, rc;

	fakenet_opts_init(&opts);
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		if (!strcmp(argv[i], "--banner") && i + 1 < argc) {
			banner = argv[++i];
		} else {
			fakenet_err("banner: unknown argument: %s", argv[i]);
			return 2;
		}
	}
	if (!opts.have_listen || !banner) {
		fakenet_err("banner: needs --listen IP:PORT and --banner TEXT");
		return 2;
	}
	if (fakenet_start(&opts))
		return 1;
	lfd = fakenet_listen(&opts, SOCK_STREAM);
	if (lfd < 0 || fakenet_write_pidfile(&opts))
		return 1;
	rc = fakenet_accept_loop(lfd, opts.timeout_sec, banner_serve, (void *)banner);
	fakenet_err("banner: accept: %s", strerror(-rc));
	return 1;
}

/* \r, \n, \t and \\ in text, decoded into a new string. */
static char *unescape(const char *text, size_t *len)
{
	char *out = malloc(strlen(text) + 1);
	size_t w = 0;

	if (!out)
		return NULL;
	for (const char *p = text; *p; p++) {
		if (*p != '\\' || !p[1]) {
			out[w++] = *p;
			continue;
		}
		p++;
		out[w++] = *p == 'r' ? '\r' : *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
	}
	*len = w;
	return out;
}

static void print_tls_error(const char *what)
{
	char msg[256] = "connection closed";
	unsigned long e = ERR_get_error();

	if (e)
		ERR_error_string_n(e, msg, sizeof(msg));
	fakenet_err("client: %s: %s", what, msg);
}

int client_main(int argc, char **argv)
{
	struct fakenet_opts opts;
	const char *tls_name = NULL, *cacert = NULL, *send_text = NULL;
	SSL_CTX *ctx = NULL;
	SSL *ssl = NULL;
	char *payload = NULL, buf[65536];
	size_t plen = 0;
	int fd, rc = 1;

	fakenet_opts_init(&opts);
	opts.timeout_sec = 10;
	for (int i = 1; i < argc; i++) {
		int c = fakenet_parse_common(argc, argv, &i, &opts);

		if (c < 0)
			return 2;
		if (c > 0)
			continue;
		if (!strcmp(argv[i], "--tls") && i + 1 < argc) {
			tls_name = argv[++i];
		} else if (!strcmp(argv[i], "--cacert") && i + 1 < argc) {
			cacert = argv[++i];
		} else if (!strcmp(argv[i], "--send") && i + 1 < argc) {
			send_text = argv[++i];
		} else {
			fakenet_err("client: unknown argument: %s", argv[i]);
			return 2;
		}
	}
	if (!opts.have_listen || (tls_name && !cacert)) {
		fakenet_err("client: needs --connect IP:PORT (and --cacert PEM with --tls NAME)");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (send_text && !(payload = unescape(send_text, &plen)))
		return 1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	fakenet_set_timeouts(fd, opts.timeout_sec);
	if (connect(fd, (struct sockaddr *)&opts.listen, sizeof(opts.listen))) {
		fakenet_err("client: connect: %s", strerror(errno));
		goto out;
	}
	if (tls_name) {
		ctx = SSL_CTX_new(TLS_client_method());
		if (!ctx || SSL_CTX_load_verify_locations(ctx, cacert, NULL) != 1) {
			print_tls_error("cannot load the CA file");
			goto out;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		ssl = SSL_new(ctx);
		if (!ssl || !SSL_set_tlsext_host_name(ssl, tls_name) ||
		    !SSL_set1_host(ssl, tls_name) ||
		    SSL_set_alpn_protos(ssl, (const unsigned char *)"\x08http/1.1", 9) ||
		    !SSL_set_fd(ssl, fd) || SSL_connect(ssl) != 1) {
			print_tls_error("tls handshake");
			goto out;
		}
	}
	if (plen > 0) {
		int ok = ssl ? SSL_write(ssl, payload, plen) == (int)plen
			     : send_all(fd, payload, plen) == 0;

		if (!ok) {
			fakenet_err("client: send failed");
			goto out;
		}
		/* Plain TCP: say we are done, so a line server closes once it has answered. */
		if (!ssl)
			shutdown(fd, SHUT_WR);
	}
	for (;;) {
		ssize_t n = ssl ? SSL_read(ssl, buf, sizeof(buf)) : recv(fd, buf, sizeof(buf), 0);

		if (n < 0 && !ssl && errno == EINTR)
			continue;
		if (n <= 0) {
			if (ssl && SSL_get_error(ssl, n) != SSL_ERROR_ZERO_RETURN &&
			    ERR_peek_error()) {
				print_tls_error("read");
				goto out;
			}
			if (!ssl && n < 0) {
				fakenet_err("client: recv: %s", strerror(errno));
				goto out;
			}
			break;
		}
		if (fwrite(buf, 1, n, stdout) != (size_t)n)
			goto out;
	}
	rc = 0;
out:
	fflush(stdout);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(fd);
	free(payload);
	return rc;
}
