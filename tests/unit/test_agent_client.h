/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A tiny blocking client of the agent protocol for the unit tests: starts guest/agent.c in a
 * forked child on an abstract unix socket, connects to it, sends frames and collects the
 * frames of an exec. Everything fails the test (criterion asserts) instead of returning
 * errors.
 */
#ifndef SANDBOX_TESTS_TEST_AGENT_CLIENT_H
#define SANDBOX_TESTS_TEST_AGENT_CLIENT_H

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"

#define TC_WAIT_MS 20000 /* longest wait for one frame */

/* The agent under test. */
static pid_t tc_agent_pid = -1;
static struct sockaddr_un tc_addr;
static socklen_t tc_addr_len;

/* Start the agent in a child process, listening on a fresh abstract unix socket. */
static void tc_agent_start(void)
{
	static int counter;
	struct agent_config cfg;
	int fd, n;

	memset(&tc_addr, 0, sizeof(tc_addr));
	tc_addr.sun_family = AF_UNIX;
	n = snprintf(tc_addr.sun_path + 1, sizeof(tc_addr.sun_path) - 1, "sandbox-agent-test-%d-%d",
		     (int)getpid(), counter++);
	tc_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&tc_addr, tc_addr_len) == 0);
	cr_assert(listen(fd, 64) == 0);
	tc_agent_pid = fork();
	cr_assert(tc_agent_pid >= 0);
	if (tc_agent_pid == 0) {
		/* never outlive the test, even when criterion kills it at its timeout */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&cfg, 0, sizeof(cfg));
		cfg.listen_fd = fd;
		n = agent_run(&cfg);
		fprintf(stderr, "agent_run returned %d\n", n);
		_exit(1);
	}
	close(fd);
}

/* Kill the agent. */
static void tc_agent_stop(void)
{
	if (tc_agent_pid > 0) {
		kill(tc_agent_pid, SIGKILL);
		waitpid(tc_agent_pid, NULL, 0);
	}
	tc_agent_pid = -1;
}

/* One connection to the agent. */
struct tc_conn {
	int fd;
	struct proto_decoder dec;
	uint8_t buf[1 << 16];
	size_t have, pos;
};

/* One received frame, with its own copy of the payload. */
struct tc_frame {
	struct proto_hdr hdr;
	uint8_t *payload; /* malloc'd (hdr.len + 1 bytes, NUL-terminated) */
};

/* Send one frame (any type, any length: the tests send bad ones too). The header and the
 * start of the payload go in one send: the agent may refuse a frame from its header alone and
 * close, and a payload sent after that would fail with EPIPE, making the test racy. */
static void tc_send_raw(struct tc_conn *c, uint16_t type, uint64_t id, uint32_t len,
			const void *payload, size_t payload_len)
{
	struct proto_hdr hdr = {.len = len, .type = type, .flags = 0, .id = id};
	uint8_t first[PROTO_HDR_LEN + 4096];
	size_t head = payload_len < 4096 ? payload_len : 4096, done = head;
	const uint8_t *p = payload;

	proto_hdr_encode(&hdr, first);
	if (head)
		memcpy(first + PROTO_HDR_LEN, p, head);
	cr_assert(send(c->fd, first, PROTO_HDR_LEN + head, MSG_NOSIGNAL) ==
		  (ssize_t)(PROTO_HDR_LEN + head));
	while (done < payload_len) {
		ssize_t n = send(c->fd, p + done, payload_len - done, MSG_NOSIGNAL);

		cr_assert(n > 0, "send: %s", strerror(errno));
		done += (size_t)n;
	}
}

/* Send one well-formed frame. */
static void tc_send(struct tc_conn *c, uint16_t type, uint64_t id, const void *payload,
		    uint32_t len)
{
	tc_send_raw(c, type, id, len, payload, len);
}

/* Receive one frame into *f. Returns 1, or 0 at end of file. */
static int tc_recv(struct tc_conn *c, struct tc_frame *f)
{
	for (;;) {
		struct proto_frame pf;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		size_t used = 0;
		ssize_t n;
		int rc;

		if (c->pos < c->have) {
			rc = proto_decoder_feed(&c->dec, c->buf + c->pos, c->have - c->pos, &used,
						&pf);
			c->pos += used;
			cr_assert(rc >= 0, "decoder: %s", proto_decoder_error(&c->dec));
			if (rc == 1) {
				f->hdr = pf.hdr;
				f->payload = malloc(pf.hdr.len + 1);
				cr_assert(f->payload != NULL);
				if (pf.hdr.len > 0)
					memcpy(f->payload, pf.payload, pf.hdr.len);
				f->payload[pf.hdr.len] = '\0';
				return 1;
			}
			continue;
		}
		cr_assert(poll(&pfd, 1, TC_WAIT_MS) == 1, "no frame from the agent in time");
		n = recv(c->fd, c->buf, sizeof(c->buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
		cr_assert(n > 0, "recv: %s", strerror(errno));
		c->have = (size_t)n;
		c->pos = 0;
	}
}

/* Connect to the agent without HELLO. */
static void tc_connect_raw(struct tc_conn *c)
{
	memset(c, 0, sizeof(*c));
	proto_decoder_init(&c->dec);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(c->fd >= 0);
	cr_assert(connect(c->fd, (struct sockaddr *)&tc_addr, tc_addr_len) == 0);
}

/* Connect and say HELLO. */
static void tc_connect(struct tc_conn *c)
{
	uint8_t hello[sizeof(struct proto_hello)];
	struct tc_frame f;

	tc_connect_raw(c);
	proto_put_le32(hello + offsetof(struct proto_hello, version), PROTO_VERSION);
	proto_put_le32(hello + offsetof(struct proto_hello, max_payload), PROTO_MAX_PAYLOAD);
	tc_send(c, PROTO_MSG_HELLO, 0, hello, sizeof(hello));
	cr_assert(tc_recv(c, &f) == 1);
	cr_assert_eq(f.hdr.type, PROTO_MSG_HELLO);
	cr_assert_eq(proto_get_le32(f.payload), PROTO_VERSION);
	free(f.payload);
}

/* Close a connection. */
static void tc_close(struct tc_conn *c)
{
	close(c->fd);
	proto_decoder_free(&c->dec);
}

/* What an exec produced. */
struct tc_exec {
	char *out;
	size_t out_len;
	char *err;
	size_t err_len;
	bool started;
	bool exited;
	uint32_t code, sig, flags;
	bool failed; /* ERROR instead of EXIT */
	uint32_t errnum;
	char msg[512];
};

/* Append n bytes at p to *buf of *len. */
static void tc_append(char **buf, size_t *len, const uint8_t *p, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	cr_assert(*buf != NULL);
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Account one frame f to r (the exec it belongs to). Returns true once r ended. */
static bool tc_exec_take(struct tc_exec *r, const struct tc_frame *f)
{
	switch (f->hdr.type) {
	case PROTO_MSG_STARTED:
		r->started = true;
		return false;
	case PROTO_MSG_STDOUT:
		tc_append(&r->out, &r->out_len, f->payload, f->hdr.len);
		return false;
	case PROTO_MSG_STDERR:
		tc_append(&r->err, &r->err_len, f->payload, f->hdr.len);
		return false;
	case PROTO_MSG_EXIT:
		r->exited = true;
		r->code = proto_get_le32(f->payload + offsetof(struct proto_exit, code));
		r->sig = proto_get_le32(f->payload + offsetof(struct proto_exit, signal));
		r->flags = proto_get_le32(f->payload + offsetof(struct proto_exit, flags));
		return true;
	case PROTO_MSG_ERROR:
		r->failed = true;
		r->errnum = proto_get_le32(f->payload);
		snprintf(r->msg, sizeof(r->msg), "%.*s", (int)(f->hdr.len - 8), f->payload + 8);
		return true;
	default:
		cr_assert_fail("unexpected frame type %u for an exec", f->hdr.type);
		return true;
	}
}

/* Send EXEC id: argv (NULL-terminated) in cwd, with flags and a timeout. */
static void tc_exec_send(struct tc_conn *c, uint64_t id, uint32_t flags, uint32_t timeout_ms,
			 const char *cwd, const char *const *argv)
{
	static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/"};
	uint8_t buf[4096];
	size_t off = sizeof(struct proto_exec), n;
	uint16_t argc = 0, i;

	memset(buf, 0, sizeof(buf));
	n = strlen(cwd) + 1;
	memcpy(buf + off, cwd, n);
	off += n;
	for (; argv[argc] != NULL; argc++) {
		n = strlen(argv[argc]) + 1;
		cr_assert(off + n < sizeof(buf));
		memcpy(buf + off, argv[argc], n);
		off += n;
	}
	for (i = 0; i < 2; i++) {
		n = strlen(env[i]) + 1;
		memcpy(buf + off, env[i], n);
		off += n;
	}
	proto_put_le32(buf + offsetof(struct proto_exec, flags), flags);
	proto_put_le32(buf + offsetof(struct proto_exec, uid), PROTO_ID_KEEP);
	proto_put_le32(buf + offsetof(struct proto_exec, gid), PROTO_ID_KEEP);
	proto_put_le32(buf + offsetof(struct proto_exec, timeout_ms), timeout_ms);
	proto_put_le16(buf + offsetof(struct proto_exec, rows), 24);
	proto_put_le16(buf + offsetof(struct proto_exec, cols), 80);
	proto_put_le16(buf + offsetof(struct proto_exec, argc), argc);
	proto_put_le16(buf + offsetof(struct proto_exec, envc), 2);
	tc_send(c, PROTO_MSG_EXEC, id, buf, (uint32_t)off);
}

/* Collect the frames of exec id into r until it ends. */
static void tc_exec_wait(struct tc_conn *c, uint64_t id, struct tc_exec *r)
{
	struct tc_frame f;
	bool done = false;

	while (!done) {
		cr_assert(tc_recv(c, &f) == 1, "connection closed during exec %llu",
			  (unsigned long long)id);
		cr_assert_eq(f.hdr.id, id);
		done = tc_exec_take(r, &f);
		free(f.payload);
	}
}

/* Run argv to its end (no stdin) and collect it in r. */
static void tc_exec(struct tc_conn *c, uint64_t id, uint32_t flags, uint32_t timeout_ms,
		    const char *cwd, const char *const *argv, struct tc_exec *r)
{
	memset(r, 0, sizeof(*r));
	tc_exec_send(c, id, flags, timeout_ms, cwd, argv);
	tc_exec_wait(c, id, r);
}

/* Free what r holds. */
static void tc_exec_free(struct tc_exec *r)
{
	free(r->out);
	free(r->err);
}

#endif /* SANDBOX_TESTS_TEST_AGENT_CLIENT_H */
