/* SPDX-License-Identifier: Apache-2.0 */
/* client/agent_client.c, agent_files.c: a send to an agent that stopped reading gives up, and
 * a call gives up at its deadline while the agent floods it with frames (agent_file_put's
 * wait for its answer checks its deadline the same way, over 30 s: not tested here). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "sandboxctl.h"

static uint64_t ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(agent_send, a_peer_that_never_reads_times_out)
{
	static uint8_t chunk[PROTO_MAX_PAYLOAD];
	struct agent_conn c = {.send_stall_ms = 300};
	int sv[2], err = 0;
	uint64_t t0;

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	c.fd = sv[0];
	t0 = ms();
	/* The socket buffers take a few frames; then nothing moves. */
	for (int i = 0; i < 64 && err == 0; i++)
		err = agent_send(&c, PROTO_MSG_DATA, 1, chunk, sizeof(chunk));
	cr_assert(eq(int, err, -ETIMEDOUT));
	cr_assert(ms() - t0 < 5000, "gave up after %llu ms", (unsigned long long)(ms() - t0));
	close(sv[0]);
	close(sv[1]);
}

Test(agent_send, a_peer_that_reads_gets_everything)
{
	static uint8_t chunk[PROTO_MAX_PAYLOAD];
	struct agent_conn c = {.send_stall_ms = 300};
	int sv[2];
	pid_t pid;

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		static uint8_t sink[1 << 16];
		size_t total = 0;
		ssize_t n;

		close(sv[0]);
		usleep(100000); /* let the sender fill the buffer and wait */
		while ((n = read(sv[1], sink, sizeof(sink))) > 0)
			total += (size_t)n;
		_exit(total == 16 * (PROTO_HDR_LEN + sizeof(chunk)) ? 0 : 1);
	}
	close(sv[1]);
	c.fd = sv[0];
	for (int i = 0; i < 16; i++)
		cr_assert(eq(int, agent_send(&c, PROTO_MSG_DATA, 1, chunk, sizeof(chunk)), 0));
	close(sv[0]);
	int st, ok;

	cr_assert(waitpid(pid, &st, 0) == pid);
	ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	cr_assert(ok, "the reader did not get every byte");
}

/* A connection over one end of a socketpair, set up as agent_connect leaves one. */
static void conn_over(struct agent_conn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->next_id = 1;
	c->dec = malloc(sizeof(struct proto_decoder));
	c->rbuf = malloc(256u << 10); /* agent_client.c's RBUF_LEN */
	cr_assert(c->dec && c->rbuf);
	proto_decoder_init(c->dec);
}

/* A peer that never ends the call (id 1) but streams STDOUT frames of it as fast as it can. */
static pid_t flood_peer(int fd)
{
	pid_t pid = fork();

	cr_assert(pid >= 0);
	if (pid == 0) {
		uint8_t f[(PROTO_HDR_LEN + 8) * 64] = {0};
		struct proto_hdr h = {.len = 8, .type = PROTO_MSG_STDOUT, .id = 1};

		for (size_t off = 0; off < sizeof(f); off += PROTO_HDR_LEN + 8)
			proto_hdr_encode(&h, f + off);
		while (write(fd, f, sizeof(f)) > 0)
			;
		_exit(0);
	}
	return pid;
}

/* A slow consumer of each frame: the peer stays ahead, a receive never has to wait. */
static int slow_frame(void *arg, const struct proto_frame *f)
{
	(void)arg;
	(void)f;
	usleep(1000);
	return 0;
}

Test(agent_call, a_flood_of_frames_does_not_outlast_the_deadline)
{
	struct agent_conn c;
	struct proto_frame f;
	int sv[2], st;
	uint64_t t0;
	pid_t pid;

	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid = flood_peer(sv[1]);
	close(sv[1]);
	conn_over(&c, sv[0]);
	t0 = ms();
	cr_assert(eq(int, agent_call(&c, PROTO_MSG_PING, NULL, 0, 300, slow_frame, NULL, &f),
		     -ETIMEDOUT));
	cr_assert(ms() - t0 < 3000, "gave up after %llu ms", (unsigned long long)(ms() - t0));
	agent_close(&c);
	kill(pid, SIGKILL);
	cr_assert(waitpid(pid, &st, 0) == pid);
}
