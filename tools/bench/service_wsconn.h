/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small RFC 6455 client for the service benchmark (service_ws.c): a blocking WebSocket over
 * plain TCP to sandboxd's {D}/execute/ws, authenticated with X-Api-Key, text frames only, no
 * extension offered (the server then uses none). Every read and write is bounded by the
 * socket's timeout (SO_RCVTIMEO, SO_SNDTIMEO), every message by the caller's buffer.
 * Functions return 0 (or a count, an opcode) or -errno.
 */
#ifndef SANDBOX_TOOLS_BENCH_SERVICE_WSCONN_H
#define SANDBOX_TOOLS_BENCH_SERVICE_WSCONN_H

#include <stddef.h>
#include <sys/socket.h>

#define WSC_HOST_MAX 255
#define WSC_PATH_MAX 1024 /* a dataplane URL's path: /dp/<uuid> and more, with room */

#define WSC_OP_TEXT  0x1
#define WSC_OP_CLOSE 0x8
#define WSC_OP_PING  0x9
#define WSC_OP_PONG  0xa

/* Where a dataplane URL (http://HOST:PORT/PATH) points, resolved once. */
struct wsc_url {
	char host[WSC_HOST_MAX + 1];
	unsigned port;
	char path[WSC_PATH_MAX + 1];
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

/* Parse and resolve url (http:// only: the benchmark's sandboxd listens on loopback).
 * 0, or -EINVAL (not such a URL), -ENAMETOOLONG, -EHOSTUNREACH (not resolved). */
int wsc_parse_url(const char *url, struct wsc_url *u) __attribute__((warn_unused_result));

/* Connect to u, upgrade u->path + suffix with the key, each step within timeout_ms: *fd on
 * a socket whose next bytes are the server's frames. -ECONNREFUSED, -EPROTO (no
 * 101: the status line goes to stderr), -ETIME past timeout_ms, or another -errno. */
int wsc_open(const struct wsc_url *u, const char *suffix, const char *key, int timeout_ms, int *fd)
	__attribute__((warn_unused_result));

/* Bound each later read and write on fd to timeout_ms. */
int wsc_set_timeout(int fd, int timeout_ms) __attribute__((warn_unused_result));

/* Send one masked frame of opcode with len bytes (at most 64 KiB). */
int wsc_send(int fd, int opcode, const void *data, size_t len) __attribute__((warn_unused_result));

/* Read the next data message into buf (NUL-terminated, at most cap - 1 bytes, fragments
 * joined), answering pings on the way. Its opcode with *len; -EPIPE on a close frame (its
 * code in *close_code, 1005 if none) or the end of the stream, -EMSGSIZE when it does not fit,
 * -EPROTO for a masked or malformed frame, -ETIME past the socket's timeout (-ETIMEDOUT is
 * TCP's own). */
int wsc_recv(int fd, char *buf, size_t cap, size_t *len, unsigned *close_code)
	__attribute__((warn_unused_result));

/* Close 1000, wait (bounded by the socket's timeout) for the server's close or the end, then
 * close fd. */
void wsc_close(int fd);

#endif /* SANDBOX_TOOLS_BENCH_SERVICE_WSCONN_H */
