/* SPDX-License-Identifier: Apache-2.0 */
/* One raw EXEC on an open agent connection (agent_exec.h). */
#include "agent_exec.h"

#include <errno.h>
#include <string.h>

#include "proto.h"

/* `true` as `sandboxctl exec ID -- true` sends it: cwd "/", argv, a PATH for the lookup. */
static const char exec_true_strings[] = "\0true\0PATH=/usr/sbin:/usr/bin:/sbin:/bin";

/* The EXEC payload for strings (see bench_agent_exec). Its length, or 0 if over cap. */
static uint32_t exec_build(uint8_t *buf, size_t cap, const char *strings, size_t len, uint16_t argc)
{
	uint8_t *h = buf;

	if (cap < sizeof(struct proto_exec) + len)
		return 0;
	memset(h, 0, sizeof(struct proto_exec));
	proto_put_le32(h + offsetof(struct proto_exec, uid), PROTO_ID_KEEP);
	proto_put_le32(h + offsetof(struct proto_exec, gid), PROTO_ID_KEEP);
	proto_put_le16(h + offsetof(struct proto_exec, argc), argc);
	proto_put_le16(h + offsetof(struct proto_exec, envc), 1);
	memcpy(buf + sizeof(struct proto_exec), strings, len);
	return (uint32_t)(sizeof(struct proto_exec) + len);
}

int bench_agent_exec(struct agent_conn *c, const char *strings, size_t len, uint16_t argc)
{
	uint8_t payload[256];
	uint32_t plen = exec_build(payload, sizeof(payload), strings, len, argc);
	struct proto_frame f;
	int err;

	if (!plen)
		return -E2BIG;
	if ((err = agent_call(c, PROTO_MSG_EXEC, payload, plen, BENCH_AGENT_TIMEOUT_MS, NULL, NULL,
			      &f)) < 0)
		return err;
	if (f.hdr.type == PROTO_MSG_EXIT)
		return proto_get_le32(f.payload + offsetof(struct proto_exit, code)) ? -ECHILD : 0;
	return f.hdr.type == PROTO_MSG_ERROR ? -(int)proto_get_le32(f.payload) : -EPROTO;
}

int bench_agent_exec_true(struct agent_conn *c)
{
	return bench_agent_exec(c, exec_true_strings, sizeof(exec_true_strings), 1);
}
