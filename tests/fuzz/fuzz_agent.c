/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the guest agent's handling of frames from the host (guest/agent*.c):
 * the input is what a hostile client sends on the agent's connection. Its first byte chooses
 * how the rest is cut into reads (1 to 256 bytes, as agent_conn_read gets them); the stream is
 * decoded as the agent decodes it, each frame passes the agent's own dispatch checks
 * (agent_frame_check: type, HELLO first, call ids), and the payloads of the calls that carry
 * strings go through the handlers' parsers: EXEC's (agent_exec_parse: cwd, argv, env), the
 * command sessions' (agent_session_parse: the command id and offsets of SESSION_EXEC and
 * SESSION_ATTACH, then SESSION_EXEC's strings) and the file calls' paths (agent_file_path, at
 * the offset each handler reads it from). Every string handed out must be NUL-terminated
 * inside the payload, a command id must lie inside it with 1 to PROTO_SESSION_ID_MAX bytes, and
 * the counts must be the frame's. The UTF-8 sanitiser of session output (agent_ring.c) gets
 * every payload as if a program had written it: its output must be valid UTF-8 (sanitising it
 * again changes nothing) of at most three times the input's length.
 * Nothing is executed or written: the handlers' actions are not the parser's.
 *
 * Built and run by tests/fuzz/run.sh agent; seeds in tests/fuzz/corpus/agent/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_agent: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* True when the string s is NUL-terminated inside the frame's payload. */
static int fuzz_in_payload(const struct proto_frame *f, const char *s)
{
	const uint8_t *p = (const uint8_t *)s;

	return s && p >= f->payload && p < f->payload + f->hdr.len &&
	       memchr(p, 0, (size_t)(f->payload + f->hdr.len - p)) != NULL;
}

static void fuzz_exec(const struct proto_frame *f)
{
	uint16_t argc = proto_get_le16(f->payload + offsetof(struct proto_exec, argc));
	uint16_t envc = proto_get_le16(f->payload + offsetof(struct proto_exec, envc));
	struct agent_exec_req req;

	if (agent_exec_parse(f, &req) < 0)
		return;
	fuzz_check(fuzz_in_payload(f, req.cwd));
	fuzz_check((req.flags & ~PROTO_EXEC_FLAGS) == 0 && argc >= 1 && req.argv[0][0] != '\0');
	for (unsigned i = 0; i < argc; i++)
		fuzz_check(fuzz_in_payload(f, req.argv[i]));
	for (unsigned i = 0; i < envc; i++)
		fuzz_check(fuzz_in_payload(f, req.envp[i]));
	fuzz_check(req.argv[argc] == NULL && req.envp[envc] == NULL);
	free(req.argv);
	free(req.envp);
}

/* SESSION_EXEC (attach false) or SESSION_ATTACH: the head, the id, then EXEC's strings. */
static void fuzz_session(const struct proto_frame *f, bool attach)
{
	struct agent_session_req q;
	int rc = agent_session_parse(f, attach, &q);

	if (rc == -EINVAL) {
		fuzz_check(q.id_len == 0 || q.id_len > PROTO_SESSION_ID_MAX);
		return;
	}
	if (rc < 0)
		return;
	fuzz_check(q.id_len >= 1 && q.id_len <= PROTO_SESSION_ID_MAX);
	fuzz_check(q.id >= f->payload && q.id + q.id_len <= f->payload + f->hdr.len);
	fuzz_check(q.strings_off <= f->hdr.len);
	fuzz_check(attach || (q.exec.flags & ~PROTO_SESSION_FLAGS) == 0);
	if (attach || agent_exec_parse_strings(f->payload, f->hdr.len, q.strings_off, q.argc,
					       q.envc, &q.exec) < 0)
		return;
	fuzz_check(fuzz_in_payload(f, q.exec.cwd) && q.exec.argv[0][0] != '\0');
	for (unsigned i = 0; i < q.argc; i++)
		fuzz_check(fuzz_in_payload(f, q.exec.argv[i]) &&
			   (const uint8_t *)q.exec.argv[i] >= f->payload + q.strings_off);
	for (unsigned i = 0; i < q.envc; i++)
		fuzz_check(fuzz_in_payload(f, q.exec.envp[i]));
	fuzz_check(q.exec.argv[q.argc] == NULL && q.exec.envp[q.envc] == NULL);
	free(q.exec.argv);
	free(q.exec.envp);
}

/* The payload as a program's output: sanitised, it is valid UTF-8 that sanitising keeps. */
static void fuzz_utf8(const uint8_t *p, size_t n)
{
	uint8_t *once = malloc(3 * n + 1), *twice = malloc(3 * (3 * n) + 1);
	uint8_t tail[4], tail_len;
	size_t len, len2, held;

	fuzz_check(once != NULL && twice != NULL);
	len = agent_utf8_sanitize(p, n, true, once, tail, &tail_len);
	fuzz_check(len <= 3 * n && tail_len == 0);
	len2 = agent_utf8_sanitize(once, len, true, twice, tail, &tail_len);
	fuzz_check(len2 == len && memcmp(once, twice, len) == 0);
	/* not at eof: what is held back is a proper prefix of one character, at the end */
	len = agent_utf8_sanitize(p, n, false, once, tail, &tail_len);
	held = tail_len;
	fuzz_check(held <= 3 && held <= n && (held == 0 || memcmp(tail, p + n - held, held) == 0));
	free(once);
	free(twice);
}

/* The payload offset of the path of the file calls (agent_file.c), or -1. */
static long fuzz_path_offset(uint16_t type)
{
	switch (type) {
	case PROTO_MSG_FILE_WRITE:
		return sizeof(struct proto_file_write);
	case PROTO_MSG_FILE_READ:
	case PROTO_MSG_STAT:
	case PROTO_MSG_LIST:
		return 0;
	case PROTO_MSG_MKDIR:
		return sizeof(struct proto_mkdir);
	case PROTO_MSG_REMOVE:
		return sizeof(struct proto_remove);
	default:
		return -1;
	}
}

/* One frame as agent_conn_dispatch takes it; false when the connection fails on it. */
static bool fuzz_frame(struct agent_conn *c, const struct proto_frame *f)
{
	const char *why = NULL, *path;
	uint32_t min_len;
	long off;

	fuzz_check(proto_type_min_len(f->hdr.type, &min_len) == 0 && f->hdr.len >= min_len);
	if (agent_frame_check(c, f, &why) < 0) {
		fuzz_check(why != NULL);
		return false;
	}
	fuzz_check(c->hello_done || f->hdr.type == PROTO_MSG_HELLO);
	switch (f->hdr.type) {
	case PROTO_MSG_HELLO:
		/* agent_handle_hello: once, id 0, our version */
		if (c->hello_done || f->hdr.id != 0 ||
		    proto_get_le32(f->payload + offsetof(struct proto_hello, version)) !=
			    PROTO_VERSION)
			return false;
		c->hello_done = true;
		break;
	case PROTO_MSG_EXEC:
		fuzz_exec(f);
		break;
	case PROTO_MSG_SESSION_EXEC:
		fuzz_session(f, false);
		break;
	case PROTO_MSG_SESSION_ATTACH:
		fuzz_session(f, true);
		break;
	case PROTO_MSG_STDIN:
		fuzz_utf8(f->payload, f->hdr.len);
		break;
	default:
		off = fuzz_path_offset(f->hdr.type);
		if (off >= 0 && agent_file_path(f, (size_t)off, &path) == 0)
			fuzz_check(fuzz_in_payload(f, path) && path[0] != '\0');
		break;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_conn c;
	size_t step, pos = 1;

	if (size == 0)
		return 0;
	memset(&c, 0, sizeof(c));
	step = (size_t)data[0] + 1;
	proto_decoder_init(&c.dec);
	while (pos < size) {
		size_t n = size - pos < step ? size - pos : step;
		/* Each read in a buffer of its own size: a decoder that keeps a pointer into
		 * the last one, or reads past this one, is an ASan report. */
		uint8_t *buf = malloc(n);
		size_t at = 0;
		bool alive = true;

		fuzz_check(buf != NULL);
		memcpy(buf, data + pos, n);
		while (at < n && alive) {
			struct proto_frame f;
			size_t used = 0;
			int rc = proto_decoder_feed(&c.dec, buf + at, n - at, &used, &f);

			fuzz_check(used <= n - at);
			at += used;
			if (rc < 0)
				alive = false;
			else if (rc == 1)
				alive = fuzz_frame(&c, &f);
		}
		free(buf);
		if (!alive)
			break;
		pos += n;
	}
	proto_decoder_free(&c.dec);
	return 0;
}
