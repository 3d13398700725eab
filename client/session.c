/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host side of the agent's command sessions (wire/proto.h SESSION_*, docs/agent-protocol.md
 * "Command sessions"): the SESSION_EXEC and SESSION_ATTACH payloads, and the decoders of
 * SESSION_OUT and of SESSION_LIST's DATA frames. No I/O: the caller (sandboxd) sends and
 * receives with agent_send and agent_recv. Frames from the agent are hostile input: every
 * length is checked before a byte is read.
 */
#include <errno.h>
#include <string.h>

#include "client.h"
#include "proto.h"

/* Append the string s and its NUL at out[*off], within cap. 0 or -EMSGSIZE. */
static int session_put_string(uint8_t *out, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;

	if (n > cap - *off)
		return -EMSGSIZE;
	memcpy(out + *off, s, n);
	*off += n;
	return 0;
}

/* A timer of the API (-1: never) as the wire has it, or -EINVAL. */
static int session_timer(int64_t v, uint32_t *out)
{
	if (v == -1) {
		*out = PROTO_SESSION_NEVER;
		return 0;
	}
	if (v < 0 || v >= (int64_t)PROTO_SESSION_NEVER)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* The length of a command id, or -EINVAL when it is out of bounds. */
static int session_id_len(const char *id)
{
	size_t n = id != NULL ? strnlen(id, PROTO_SESSION_ID_MAX + 1) : 0;

	return n == 0 || n > PROTO_SESSION_ID_MAX ? -EINVAL : (int)n;
}

/* Encode SESSION_EXEC; see client.h. */
int session_exec_payload(const struct session_req *q, uint8_t *out, size_t cap)
{
	uint32_t flags = 0, idle, ttl;
	size_t off = sizeof(struct proto_session);
	int id_len = session_id_len(q->id), i, rc;

	if (id_len < 0 || q->argc < 1 || q->argc > UINT16_MAX || q->envc < 0 ||
	    q->envc > UINT16_MAX || q->argv == NULL || (q->envc > 0 && q->env == NULL) ||
	    session_timer(q->idle_timeout_s, &idle) < 0 || session_timer(q->ttl_s, &ttl) < 0)
		return -EINVAL;
	if (cap > PROTO_MAX_PAYLOAD)
		cap = PROTO_MAX_PAYLOAD;
	if (cap < off + (size_t)id_len)
		return -EMSGSIZE;
	if (q->pty)
		flags |= PROTO_EXEC_PTY;
	if (q->stdin)
		flags |= PROTO_EXEC_STDIN;
	if (q->kill_on_disconnect)
		flags |= PROTO_SESSION_KILL_ON_DISCONNECT;
	if (q->shell_fallback)
		flags |= PROTO_SESSION_SHELL_FALLBACK;
	memset(out, 0, off);
	proto_put_le32(out + offsetof(struct proto_session, flags), flags);
	proto_put_le32(out + offsetof(struct proto_session, uid), q->uid);
	proto_put_le32(out + offsetof(struct proto_session, gid), q->gid);
	proto_put_le32(out + offsetof(struct proto_session, timeout_ms), q->timeout_ms);
	proto_put_le32(out + offsetof(struct proto_session, idle_timeout_s), idle);
	proto_put_le32(out + offsetof(struct proto_session, ttl_s), ttl);
	proto_put_le16(out + offsetof(struct proto_session, id_len), (uint16_t)id_len);
	proto_put_le16(out + offsetof(struct proto_session, argc), (uint16_t)q->argc);
	proto_put_le16(out + offsetof(struct proto_session, envc), (uint16_t)q->envc);
	proto_put_le16(out + offsetof(struct proto_session, rows), q->rows);
	proto_put_le16(out + offsetof(struct proto_session, cols), q->cols);
	memcpy(out + off, q->id, (size_t)id_len);
	off += (size_t)id_len;
	rc = session_put_string(out, cap, &off, q->cwd != NULL ? q->cwd : "");
	for (i = 0; rc == 0 && i < q->argc; i++)
		rc = q->argv[i] != NULL ? session_put_string(out, cap, &off, q->argv[i]) : -EINVAL;
	for (i = 0; rc == 0 && i < q->envc; i++)
		rc = q->env[i] != NULL ? session_put_string(out, cap, &off, q->env[i]) : -EINVAL;
	if (rc == 0 && q->argv[0][0] == '\0')
		rc = -EINVAL;
	return rc < 0 ? rc : (int)off;
}

/* Encode SESSION_ATTACH; see client.h. */
int session_attach_payload(const char *id, uint64_t off_out, uint64_t off_err, uint8_t *out,
			   size_t cap)
{
	size_t head = sizeof(struct proto_session_attach);
	int id_len = session_id_len(id);

	if (id_len < 0)
		return -EINVAL;
	if (cap < head + (size_t)id_len)
		return -EMSGSIZE;
	memset(out, 0, head);
	proto_put_le64(out + offsetof(struct proto_session_attach, stdout_offset), off_out);
	proto_put_le64(out + offsetof(struct proto_session_attach, stderr_offset), off_err);
	proto_put_le16(out + offsetof(struct proto_session_attach, id_len), (uint16_t)id_len);
	memcpy(out + head, id, (size_t)id_len);
	return (int)(head + (size_t)id_len);
}

/* Decode SESSION_OUT; see client.h. */
int session_out_parse(const struct proto_frame *f, int *stream, uint64_t *offset,
		      const uint8_t **data, size_t *len)
{
	size_t head = sizeof(struct proto_session_out), n;
	uint32_t s;
	uint64_t o;

	if (f->hdr.type != PROTO_MSG_SESSION_OUT || f->hdr.len < head)
		return -EPROTO;
	n = f->hdr.len - head;
	s = proto_get_le32(f->payload + offsetof(struct proto_session_out, stream));
	o = proto_get_le64(f->payload + offsetof(struct proto_session_out, offset));
	if ((s != PROTO_STREAM_STDOUT && s != PROTO_STREAM_STDERR) || n > PROTO_DATA_CHUNK ||
	    o > UINT64_MAX - n)
		return -EPROTO;
	*stream = (int)s;
	*offset = o;
	*data = f->payload + head;
	*len = n;
	return 0;
}

/* Decode a SESSION_LIST DATA frame; see client.h. */
int session_info_parse(const struct proto_frame *f, struct session_info *out)
{
	size_t head = sizeof(struct proto_session_info), n;
	const uint8_t *p = f->payload;
	uint32_t flags;

	if (f->hdr.type != PROTO_MSG_DATA || f->hdr.len < head)
		return -EPROTO;
	n = f->hdr.len - head;
	if (n == 0 || n > PROTO_SESSION_ID_MAX || memchr(p + head, 0, n) != NULL)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out->id, p + head, n);
	flags = proto_get_le32(p + offsetof(struct proto_session_info, flags));
	out->pid = proto_get_le32(p + offsetof(struct proto_session_info, pid));
	out->running = flags & PROTO_SESSION_RUNNING;
	out->exited = flags & PROTO_SESSION_EXITED;
	out->pty = flags & PROTO_SESSION_PTY;
	out->exit_code = proto_get_le32(p + offsetof(struct proto_session_info, exit_code));
	out->exit_flags = proto_get_le32(p + offsetof(struct proto_session_info, exit_flags));
	out->stdout_len = proto_get_le64(p + offsetof(struct proto_session_info, stdout_len));
	out->stderr_len = proto_get_le64(p + offsetof(struct proto_session_info, stderr_len));
	out->started_ms = proto_get_le64(p + offsetof(struct proto_session_info, started_ms));
	return 0;
}
