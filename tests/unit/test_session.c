/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of client/session.c: the SESSION_EXEC and SESSION_ATTACH payloads sandboxd sends, and
 * its decoders of SESSION_OUT and SESSION_LIST frames (hostile input from the guest).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "client.h"
#include "proto.h"

Test(session, exec_payload_layout)
{
	static const char *const argv[] = {"/bin/bash", "-c", "echo hi"};
	static const char *const env[] = {"A=1"};
	struct session_req q = {
		.id = "cmd-7",
		.argv = argv,
		.argc = 3,
		.env = env,
		.envc = 1,
		.cwd = "/root",
		.uid = 1000,
		.gid = PROTO_ID_KEEP,
		.timeout_ms = 60000,
		.idle_timeout_s = -1,
		.ttl_s = 600,
		.pty = true,
		.stdin = true,
		.kill_on_disconnect = true,
		.rows = 24,
		.cols = 80,
	};
	static const char strings[] = "cmd-7/root\0/bin/bash\0-c\0echo hi\0A=1";
	uint8_t out[512];
	int n = session_exec_payload(&q, out, sizeof(out));

	cr_assert_eq(n, (int)(sizeof(struct proto_session) + sizeof(strings)));
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, flags)),
		     PROTO_EXEC_PTY | PROTO_EXEC_STDIN | PROTO_SESSION_KILL_ON_DISCONNECT);
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, uid)), 1000);
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, gid)), PROTO_ID_KEEP);
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, timeout_ms)), 60000);
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, idle_timeout_s)),
		     PROTO_SESSION_NEVER);
	cr_assert_eq(proto_get_le32(out + offsetof(struct proto_session, ttl_s)), 600);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session, id_len)), 5);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session, argc)), 3);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session, envc)), 1);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session, rows)), 24);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session, cols)), 80);
	cr_assert_eq(proto_get_le64(out + offsetof(struct proto_session, stdout_offset)), 0);
	cr_assert(memcmp(out + sizeof(struct proto_session), strings, sizeof(strings)) == 0);
}

Test(session, exec_payload_refusals)
{
	static const char *const argv[] = {"true"};
	char long_id[PROTO_SESSION_ID_MAX + 2];
	struct session_req q = {.id = "x", .argv = argv, .argc = 1, .ttl_s = -1};
	uint8_t out[256];

	cr_assert_gt(session_exec_payload(&q, out, sizeof(out)), 0);
	cr_assert_eq(session_exec_payload(&q, out, sizeof(struct proto_session) + 3), -EMSGSIZE);
	q.idle_timeout_s = -2;
	cr_assert_eq(session_exec_payload(&q, out, sizeof(out)), -EINVAL);
	q.idle_timeout_s = 0xffffffffLL;
	cr_assert_eq(session_exec_payload(&q, out, sizeof(out)), -EINVAL);
	q.idle_timeout_s = 300;
	q.id = "";
	cr_assert_eq(session_exec_payload(&q, out, sizeof(out)), -EINVAL);
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	q.id = long_id;
	cr_assert_eq(session_exec_payload(&q, out, sizeof(out)), -EINVAL);
	long_id[PROTO_SESSION_ID_MAX] = '\0'; /* 128 bytes: the most */
	cr_assert_gt(session_exec_payload(&q, out, sizeof(out)), 0);
	q.argc = 0;
	cr_assert_eq(session_exec_payload(&q, out, sizeof(out)), -EINVAL);
}

Test(session, attach_payload_layout)
{
	uint8_t out[64];
	int n = session_attach_payload("C1", 2, 7, out, sizeof(out));

	cr_assert_eq(n, (int)sizeof(struct proto_session_attach) + 2);
	cr_assert_eq(proto_get_le64(out + offsetof(struct proto_session_attach, stdout_offset)), 2);
	cr_assert_eq(proto_get_le64(out + offsetof(struct proto_session_attach, stderr_offset)), 7);
	cr_assert_eq(proto_get_le16(out + offsetof(struct proto_session_attach, id_len)), 2);
	cr_assert(memcmp(out + sizeof(struct proto_session_attach), "C1", 2) == 0);
	cr_assert_eq(session_attach_payload("C1", 0, 0, out, 25), -EMSGSIZE);
	cr_assert_eq(session_attach_payload("", 0, 0, out, sizeof(out)), -EINVAL);
}

/* A frame of type with the payload at p. */
static struct proto_frame ts_frame(uint16_t type, const uint8_t *p, uint32_t len)
{
	struct proto_frame f = {.hdr = {.len = len, .type = type}, .payload = p};

	return f;
}

Test(session, out_parse)
{
	uint8_t p[sizeof(struct proto_session_out) + 4] = {0};
	struct proto_frame f;
	const uint8_t *data;
	uint64_t off;
	size_t len;
	int stream;

	proto_put_le32(p + offsetof(struct proto_session_out, stream), PROTO_STREAM_STDERR);
	proto_put_le64(p + offsetof(struct proto_session_out, offset), 1u << 20);
	memcpy(p + sizeof(struct proto_session_out), "abc\n", 4);
	f = ts_frame(PROTO_MSG_SESSION_OUT, p, sizeof(p));
	cr_assert_eq(session_out_parse(&f, &stream, &off, &data, &len), 0);
	cr_assert_eq(stream, PROTO_STREAM_STDERR);
	cr_assert_eq(off, 1u << 20);
	cr_assert_eq(len, 4);
	cr_assert(memcmp(data, "abc\n", 4) == 0);
	/* hostile: another type, short, an unknown stream, an offset that wraps */
	f = ts_frame(PROTO_MSG_STDOUT, p, sizeof(p));
	cr_assert_eq(session_out_parse(&f, &stream, &off, &data, &len), -EPROTO);
	f = ts_frame(PROTO_MSG_SESSION_OUT, p, 15);
	cr_assert_eq(session_out_parse(&f, &stream, &off, &data, &len), -EPROTO);
	proto_put_le32(p + offsetof(struct proto_session_out, stream), 3);
	f = ts_frame(PROTO_MSG_SESSION_OUT, p, sizeof(p));
	cr_assert_eq(session_out_parse(&f, &stream, &off, &data, &len), -EPROTO);
	proto_put_le32(p + offsetof(struct proto_session_out, stream), PROTO_STREAM_STDOUT);
	proto_put_le64(p + offsetof(struct proto_session_out, offset), UINT64_MAX - 2);
	cr_assert_eq(session_out_parse(&f, &stream, &off, &data, &len), -EPROTO);
}

Test(session, info_parse)
{
	uint8_t p[sizeof(struct proto_session_info) + 3] = {0};
	struct session_info info;
	struct proto_frame f;

	proto_put_le32(p + offsetof(struct proto_session_info, pid), 42);
	proto_put_le32(p + offsetof(struct proto_session_info, flags),
		       PROTO_SESSION_EXITED | PROTO_SESSION_PTY);
	proto_put_le32(p + offsetof(struct proto_session_info, exit_code), 137);
	proto_put_le32(p + offsetof(struct proto_session_info, exit_flags), PROTO_EXIT_SIGNALED);
	proto_put_le64(p + offsetof(struct proto_session_info, stdout_len), 5);
	proto_put_le64(p + offsetof(struct proto_session_info, started_ms), 1700000000000ull);
	memcpy(p + sizeof(struct proto_session_info), "C-9", 3);
	f = ts_frame(PROTO_MSG_DATA, p, sizeof(p));
	cr_assert_eq(session_info_parse(&f, &info), 0);
	cr_assert_str_eq(info.id, "C-9");
	cr_assert_eq(info.pid, 42);
	cr_assert(info.exited && info.pty && !info.running);
	cr_assert_eq(info.exit_code, 137);
	cr_assert_eq(info.stdout_len, 5);
	cr_assert_eq(info.started_ms, 1700000000000ull);
	p[sizeof(struct proto_session_info) + 1] = '\0'; /* an id with a NUL */
	cr_assert_eq(session_info_parse(&f, &info), -EPROTO);
	f = ts_frame(PROTO_MSG_DATA, p, sizeof(struct proto_session_info)); /* no id */
	cr_assert_eq(session_info_parse(&f, &info), -EPROTO);
}
