/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of client/agent_refresh.c: agent_refresh against a fake agent in a forked child, on a
 * unix socket as the VMM's vsock.sock would be (CONNECT 52, HELLO, then calls). The fake
 * checks what it is sent and answers as each test tells it; the host's clock and RNG are not
 * touched.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "proto.h"

/* How the fake agent answers each call. */
enum fake_answer {
	FAKE_OK,
	FAKE_ERROR_EPERM, /* ERROR EPERM */
	FAKE_ERROR_ZERO,  /* ERROR with errno 0 */
	FAKE_SILENT,	  /* nothing */
};

/* Exit statuses of the fake: what it saw. */
#define FAKE_EXIT_SEEN_BOTH  0 /* a good RESEED, then a good SET_CLOCK */
#define FAKE_EXIT_SEEN_ONE   1 /* a good RESEED, then the client went away */
#define FAKE_EXIT_BAD_RESEED 2
#define FAKE_EXIT_BAD_CLOCK  3
#define FAKE_EXIT_BAD_STREAM 4

static char fake_path[108];
static pid_t fake_pid = -1;

/* Send one frame from the fake; exits on failure. */
static void fake_send(int fd, uint16_t type, uint64_t id, const void *payload, uint32_t len)
{
	uint8_t buf[PROTO_HDR_LEN + 64];
	long n = proto_frame_encode(buf, sizeof(buf), type, id, payload, len);

	if (n < 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
		_exit(FAKE_EXIT_BAD_STREAM);
}

/* The next frame the client sent, or 0 when it went away. */
static int fake_recv(int fd, struct proto_decoder *d, uint8_t *buf, size_t *have, size_t *pos,
		     struct proto_frame *f)
{
	for (;;) {
		size_t used = 0;
		ssize_t n;
		int rc;

		if (*pos < *have) {
			rc = proto_decoder_feed(d, buf + *pos, *have - *pos, &used, f);
			*pos += used;
			if (rc < 0)
				_exit(FAKE_EXIT_BAD_STREAM);
			if (rc == 1)
				return 1;
			continue;
		}
		n = recv(fd, buf, 4096, 0);
		if (n <= 0)
			return 0;
		*have = (size_t)n;
		*pos = 0;
	}
}

/* Answer call id of f as told. */
static void fake_answer(int fd, uint64_t id, enum fake_answer how)
{
	uint8_t err[sizeof(struct proto_error)] = {0};

	switch (how) {
	case FAKE_OK:
		fake_send(fd, PROTO_MSG_OK, id, NULL, 0);
		break;
	case FAKE_ERROR_EPERM:
		proto_put_le32(err + offsetof(struct proto_error, err), EPERM);
		fake_send(fd, PROTO_MSG_ERROR, id, err, sizeof(err));
		break;
	case FAKE_ERROR_ZERO:
		fake_send(fd, PROTO_MSG_ERROR, id, err, sizeof(err));
		break;
	case FAKE_SILENT:
		break;
	}
}

/* The fake agent: one connection, HELLO, then RESEED and SET_CLOCK answered as told. */
static void fake_serve(int listen_fd, enum fake_answer reseed, enum fake_answer clock_how)
{
	static uint8_t buf[4096];
	uint8_t hello[sizeof(struct proto_hello)];
	size_t have = 0, pos = 0, n = 0;
	struct proto_decoder d;
	struct proto_frame f;
	struct timespec now;
	char line[16];
	int fd;

	fd = accept(listen_fd, NULL, NULL);
	while (fd >= 0 && n < sizeof(line) && read(fd, line + n, 1) == 1 && line[n] != '\n')
		n++;
	if (fd < 0 || n != strlen("CONNECT 52") || memcmp(line, "CONNECT 52", n) != 0 ||
	    write(fd, "OK 1\n", 5) != 5)
		_exit(FAKE_EXIT_BAD_STREAM);
	proto_decoder_init(&d);
	if (fake_recv(fd, &d, buf, &have, &pos, &f) != 1 || f.hdr.type != PROTO_MSG_HELLO)
		_exit(FAKE_EXIT_BAD_STREAM);
	proto_put_le32(hello + offsetof(struct proto_hello, version), PROTO_VERSION);
	proto_put_le32(hello + offsetof(struct proto_hello, max_payload), PROTO_MAX_PAYLOAD);
	fake_send(fd, PROTO_MSG_HELLO, 0, hello, sizeof(hello));

	if (fake_recv(fd, &d, buf, &have, &pos, &f) != 1 || f.hdr.type != PROTO_MSG_RESEED ||
	    f.hdr.len != 64 || f.hdr.id == 0)
		_exit(FAKE_EXIT_BAD_RESEED);
	fake_answer(fd, f.hdr.id, reseed);
	if (fake_recv(fd, &d, buf, &have, &pos, &f) != 1)
		_exit(FAKE_EXIT_SEEN_ONE);
	clock_gettime(CLOCK_REALTIME, &now);
	if (f.hdr.type != PROTO_MSG_SET_CLOCK || f.hdr.len != sizeof(struct proto_set_clock) ||
	    proto_get_le32(f.payload + offsetof(struct proto_set_clock, nsec)) >= 1000000000u ||
	    proto_get_le32(f.payload + offsetof(struct proto_set_clock, reserved)) != 0 ||
	    proto_get_le64(f.payload + offsetof(struct proto_set_clock, sec)) >
		    (uint64_t)now.tv_sec ||
	    proto_get_le64(f.payload + offsetof(struct proto_set_clock, sec)) + 5 <
		    (uint64_t)now.tv_sec)
		_exit(FAKE_EXIT_BAD_CLOCK);
	fake_answer(fd, f.hdr.id, clock_how);
	while (fake_recv(fd, &d, buf, &have, &pos, &f) == 1)
		; /* until the client closes */
	_exit(FAKE_EXIT_SEEN_BOTH);
}

/* Start the fake agent on a fresh socket path. */
static void fake_start(enum fake_answer reseed, enum fake_answer clock_how)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd;

	snprintf(fake_path, sizeof(fake_path), "/tmp/agent-refresh-test-%d.sock", (int)getpid());
	unlink(fake_path);
	memcpy(addr.sun_path, fake_path, strlen(fake_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	cr_assert(listen(fd, 1) == 0);
	fake_pid = fork();
	cr_assert(fake_pid >= 0);
	if (fake_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fake_serve(fd, reseed, clock_how);
	}
	close(fd);
}

/* Wait for the fake to end; returns its exit status. */
static int fake_wait(void)
{
	int st;

	cr_assert(waitpid(fake_pid, &st, 0) == fake_pid);
	fake_pid = -1;
	unlink(fake_path);
	cr_assert(WIFEXITED(st), "the fake agent died");
	return WEXITSTATUS(st);
}

/* Connect to the fake, refresh, close; returns agent_refresh's result. */
static int refresh_once(unsigned timeout_ms)
{
	struct agent_conn c;
	int err;

	cr_assert(agent_connect_path(fake_path, 5000, &c) == 0);
	err = agent_refresh(&c, timeout_ms);
	agent_close(&c);
	return err;
}

Test(agent_refresh, reseeds_then_sets_the_clock)
{
	fake_start(FAKE_OK, FAKE_OK);
	cr_assert_eq(refresh_once(5000), 0);
	cr_assert_eq(fake_wait(), FAKE_EXIT_SEEN_BOTH);
}

Test(agent_refresh, a_refused_reseed_stops_it_with_the_agents_errno)
{
	fake_start(FAKE_ERROR_EPERM, FAKE_OK);
	cr_assert_eq(refresh_once(5000), -EPERM);
	cr_assert_eq(fake_wait(), FAKE_EXIT_SEEN_ONE, "SET_CLOCK was sent after a failed RESEED");
}

Test(agent_refresh, a_refused_clock_is_the_agents_errno)
{
	fake_start(FAKE_OK, FAKE_ERROR_EPERM);
	cr_assert_eq(refresh_once(5000), -EPERM);
	cr_assert_eq(fake_wait(), FAKE_EXIT_SEEN_BOTH);
}

Test(agent_refresh, an_error_without_an_errno_is_not_success)
{
	fake_start(FAKE_OK, FAKE_ERROR_ZERO);
	cr_assert_eq(refresh_once(5000), -EPROTO);
	cr_assert_eq(fake_wait(), FAKE_EXIT_SEEN_BOTH);
}

Test(agent_refresh, no_answer_times_out)
{
	uint64_t t0 = now_ms();

	fake_start(FAKE_SILENT, FAKE_OK);
	cr_assert_eq(refresh_once(300), -ETIMEDOUT);
	cr_assert(now_ms() - t0 < 5000, "gave up after %llu ms",
		  (unsigned long long)(now_ms() - t0));
	cr_assert_eq(fake_wait(), FAKE_EXIT_SEEN_ONE);
}
