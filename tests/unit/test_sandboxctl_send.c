/* SPDX-License-Identifier: Apache-2.0 */
/* tools/sandboxctl/agent_client.c: a send to an agent that stopped reading gives up. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <stdlib.h>
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
