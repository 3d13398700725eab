/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the host's side of the agent protocol, client/agent_client.c: the input
 * is what a hostile guest agent sends on the vsock connection, written into a socket pair
 * whose other end is a struct agent_conn (agent_conn_init). The first byte picks how:
 *   even  the bytes arrive 1 to 128 at a time, each batch read with agent_recv (frames whole
 *         in the read buffer are handed out in place, split ones go through the decoder)
 *   odd   all of them are there at once and the guest then closes; agent_call makes calls
 *         (PING, ids 1, 2, ...) and takes frames until each call's final one
 * Every frame handed out must pass proto_hdr_check and have its payload readable; a refusal
 * is -EPROTO or the end of the stream, never a hang (every wait is 0 ms) or a crash.
 *
 * Built and run by tests/fuzz/run.sh agent_client; seeds in tests/fuzz/corpus/agent_client/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

#define FUZZ_INPUT_MAX (64u << 10) /* fits a socket pair's buffer: the writes never block */
#define FUZZ_CALLS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_agent_client: %s:%d: %s\n", __FILE__, __LINE__,      \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static volatile uint8_t fuzz_sink;

/* A frame as a caller uses it: the header checked, every payload byte read. */
static int fuzz_frame(void *arg, const struct proto_frame *f)
{
	uint8_t x = 0;

	fuzz_check(proto_hdr_check(&f->hdr, NULL) == 0);
	fuzz_check(f->hdr.len == 0 || f->payload != NULL);
	for (uint32_t i = 0; i < f->hdr.len; i++)
		x ^= f->payload[i];
	fuzz_sink = x;
	if (arg)
		(*(unsigned *)arg)++;
	return 0;
}

/* Send `len` bytes to the client; the socket has room (FUZZ_INPUT_MAX). */
static void fuzz_send(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		fuzz_check(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

static void fuzz_recv_batches(struct agent_conn *c, int peer, const uint8_t *p, size_t n,
			      size_t step)
{
	struct proto_frame f;
	size_t pos = 0;
	int r = 0;

	while (pos < n) {
		size_t k = n - pos < step ? n - pos : step;

		fuzz_send(peer, p + pos, k);
		pos += k;
		while ((r = agent_recv(c, 0, &f)) == 1)
			fuzz_frame(NULL, &f);
		if (r < 0)
			break;
		fuzz_check(r == 0);
	}
	if (r >= 0) {
		shutdown(peer, SHUT_WR);
		while ((r = agent_recv(c, 0, &f)) == 1)
			fuzz_frame(NULL, &f);
		/* The stream ended: a frame cut short is not handed out as one. */
		fuzz_check(r == -ECONNRESET || r == -EPROTO);
	}
}

static void fuzz_calls(struct agent_conn *c, int peer, const uint8_t *p, size_t n)
{
	struct proto_frame final;
	unsigned frames = 0;
	int r;

	fuzz_send(peer, p, n);
	shutdown(peer, SHUT_WR);
	for (unsigned i = 0; i < FUZZ_CALLS_MAX; i++) {
		r = agent_call(c, PROTO_MSG_PING, NULL, 0, 0, fuzz_frame, &frames, &final);
		if (r < 0) {
			fuzz_check(r == -ECONNRESET || r == -EPROTO || r == -ETIMEDOUT ||
				   r == -EPIPE);
			break;
		}
		fuzz_frame(NULL, &final);
		fuzz_check(final.hdr.id == i + 1 && proto_msg_is_final(final.hdr.type));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_conn c;
	int sv[2];

	if (size < 1 || size - 1 > FUZZ_INPUT_MAX)
		return 0;
	fuzz_check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	if (agent_conn_init(&c, sv[0]) < 0)
		abort();
	if (data[0] % 2 == 0)
		fuzz_recv_batches(&c, sv[1], data + 1, size - 1, (size_t)(data[0] >> 1) + 1);
	else
		fuzz_calls(&c, sv[1], data + 1, size - 1);
	agent_close(&c);
	close(sv[1]);
	return 0;
}
