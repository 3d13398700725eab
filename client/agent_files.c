/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small files to and from the guest through the agent, in memory: what the host side puts in
 * a guest without a user's command (the proxy's CA certificate and the trust bundles with it).
 * sandboxctl cp streams large files itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"

#define FILES_CHUNK   (64u << 10)
#define FILES_TIMEOUT 30000

int agent_mkdir_p(struct agent_conn *c, const char *path, uint32_t mode)
{
	uint8_t buf[sizeof(struct proto_mkdir) + 4096];
	size_t plen = strlen(path) + 1;
	struct proto_frame f;
	int err;

	if (plen > 4096)
		return -ENAMETOOLONG;
	proto_put_le32(buf + offsetof(struct proto_mkdir, mode), mode);
	proto_put_le32(buf + offsetof(struct proto_mkdir, flags), PROTO_MKDIR_PARENTS);
	memcpy(buf + sizeof(struct proto_mkdir), path, plen);
	err = agent_call(c, PROTO_MSG_MKDIR, buf, (uint32_t)(sizeof(struct proto_mkdir) + plen),
			 FILES_TIMEOUT, NULL, NULL, &f);
	if (err < 0)
		return err;
	return f.hdr.type == PROTO_MSG_OK ? 0 : -EIO;
}

int agent_file_put(struct agent_conn *c, const char *path, const void *data, size_t len,
		   uint32_t mode)
{
	uint8_t hdr[sizeof(struct proto_file_write) + 4096];
	size_t plen = strlen(path) + 1;
	uint64_t id = ++c->next_id, deadline;
	struct proto_frame f;
	int err, r;

	if (plen > 4096)
		return -ENAMETOOLONG;
	memset(hdr, 0, sizeof(struct proto_file_write));
	proto_put_le32(hdr + offsetof(struct proto_file_write, mode), mode);
	proto_put_le32(hdr + offsetof(struct proto_file_write, uid), PROTO_ID_KEEP);
	proto_put_le32(hdr + offsetof(struct proto_file_write, gid), PROTO_ID_KEEP);
	memcpy(hdr + sizeof(struct proto_file_write), path, plen);
	if ((err = agent_send(c, PROTO_MSG_FILE_WRITE, id, hdr,
			      (uint32_t)(sizeof(struct proto_file_write) + plen))) < 0)
		return err;
	for (size_t off = 0; off < len; off += FILES_CHUNK) {
		size_t n = len - off < FILES_CHUNK ? len - off : FILES_CHUNK;

		if ((err = agent_send(c, PROTO_MSG_DATA, id, (const uint8_t *)data + off,
				      (uint32_t)n)) < 0)
			return err;
	}
	if ((err = agent_send(c, PROTO_MSG_END, id, NULL, 0)) < 0)
		return err;
	/* One deadline for the answer: frames of other ids do not extend it. */
	deadline = now_ms() + FILES_TIMEOUT;
	for (;;) {
		uint64_t now = now_ms();

		if (now >= deadline) /* checked here too: a flood never lets the receive wait */
			return -ETIMEDOUT;
		r = agent_recv(c, (int)(deadline - now), &f);
		if (r <= 0)
			return r == 0 ? -ETIMEDOUT : r;
		if (f.hdr.id == id && proto_msg_is_final(f.hdr.type))
			return f.hdr.type == PROTO_MSG_OK ? 0 : -EIO;
	}
}

/* Append a DATA frame to the buffer being read, refusing to grow it beyond its cap. */
struct files_get {
	uint8_t *buf;
	size_t len, max;
};

static int files_on_frame(void *arg, const struct proto_frame *f)
{
	struct files_get *g = arg;
	uint8_t *nb;

	if (f->hdr.type != PROTO_MSG_DATA)
		return 0;
	if (f->hdr.len > g->max - g->len)
		return -EFBIG;
	nb = realloc(g->buf, g->len + f->hdr.len + 1);
	if (!nb)
		return -ENOMEM;
	g->buf = nb;
	memcpy(g->buf + g->len, f->payload, f->hdr.len);
	g->len += f->hdr.len;
	return 0;
}

int agent_file_get(struct agent_conn *c, const char *path, size_t max, char **out, size_t *len)
{
	struct files_get g = {.max = max};
	struct proto_frame f;
	int err;

	err = agent_call(c, PROTO_MSG_FILE_READ, path, (uint32_t)strlen(path) + 1, FILES_TIMEOUT,
			 files_on_frame, &g, &f);
	if (err == 0 && f.hdr.type != PROTO_MSG_END)
		err = -ENOENT;
	if (err == 0 && !g.buf && !(g.buf = malloc(1)))
		err = -ENOMEM;
	if (err < 0) {
		free(g.buf);
		return err;
	}
	g.buf[g.len] = '\0';
	*out = (char *)g.buf;
	*len = g.len;
	return 0;
}
