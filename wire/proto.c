/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest agent protocol's codec (see proto.h): header checks, frame encoding and the
 * incremental decoder. Plain C11 + POSIX, shared by sandbox-init and the host tools.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* One row of PROTO_MESSAGES. */
struct proto_type_info {
	const char *name; /* NULL: no such type */
	uint32_t min_len;
};

static const struct proto_type_info proto_types[PROTO_MSG_MAX + 1] = {
#define PROTO_X_INFO(n, value, min, dir) [value] = {#n, min},
	PROTO_MESSAGES(PROTO_X_INFO)
#undef PROTO_X_INFO
};

/* Every type value is in range and no two types share a value. */
#define PROTO_X_CHECK(n, value, min, dir)                                                          \
	_Static_assert(value > 0 && value <= PROTO_MSG_MAX, "PROTO_MSG_" #n " out of range");      \
	_Static_assert(min <= PROTO_MAX_PAYLOAD, "PROTO_MSG_" #n " minimum too large");
PROTO_MESSAGES(PROTO_X_CHECK)
#undef PROTO_X_CHECK

/* The name of a message type; see proto.h. */
const char *proto_type_name(uint16_t type)
{
	if (type > PROTO_MSG_MAX)
		return NULL;
	return proto_types[type].name;
}

/* The minimum payload length of a type; see proto.h. */
int proto_type_min_len(uint16_t type, uint32_t *min_len)
{
	if (type > PROTO_MSG_MAX || proto_types[type].name == NULL)
		return -EBADMSG;
	*min_len = proto_types[type].min_len;
	return 0;
}

/* Check a received header; see proto.h. */
int proto_hdr_check(const struct proto_hdr *hdr, const char **why)
{
	const char *reason;
	uint32_t min_len;
	int rc;

	if (hdr->len > PROTO_MAX_PAYLOAD) {
		reason = "frame larger than the maximum payload";
		rc = -EMSGSIZE;
		goto out;
	}
	if (proto_type_min_len(hdr->type, &min_len) < 0) {
		reason = "unknown message type";
		rc = -EBADMSG;
		goto out;
	}
	if (hdr->flags != 0) {
		reason = "non-zero header flags";
		rc = -EPROTO;
		goto out;
	}
	if (hdr->len < min_len) {
		reason = "payload shorter than its type's minimum";
		rc = -EPROTO;
		goto out;
	}
	return 0;
out:
	if (why != NULL)
		*why = reason;
	return rc;
}

/* Encode a header; see proto.h. */
void proto_hdr_encode(const struct proto_hdr *hdr, uint8_t out[PROTO_HDR_LEN])
{
	proto_put_le32(out + offsetof(struct proto_hdr, len), hdr->len);
	proto_put_le16(out + offsetof(struct proto_hdr, type), hdr->type);
	proto_put_le16(out + offsetof(struct proto_hdr, flags), hdr->flags);
	proto_put_le64(out + offsetof(struct proto_hdr, id), hdr->id);
}

/* Decode a header; see proto.h. */
void proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *hdr)
{
	hdr->len = proto_get_le32(in + offsetof(struct proto_hdr, len));
	hdr->type = proto_get_le16(in + offsetof(struct proto_hdr, type));
	hdr->flags = proto_get_le16(in + offsetof(struct proto_hdr, flags));
	hdr->id = proto_get_le64(in + offsetof(struct proto_hdr, id));
}

/* Encode a whole frame; see proto.h. */
long proto_frame_encode(uint8_t *out, size_t out_cap, uint16_t type, uint64_t id,
			const void *payload, uint32_t payload_len)
{
	struct proto_hdr hdr = {.len = payload_len, .type = type, .flags = 0, .id = id};

	if (payload_len > PROTO_MAX_PAYLOAD || out_cap < PROTO_HDR_LEN ||
	    out_cap - PROTO_HDR_LEN < payload_len)
		return -EMSGSIZE;
	proto_hdr_encode(&hdr, out);
	if (payload_len > 0)
		memcpy(out + PROTO_HDR_LEN, payload, payload_len);
	return (long)(PROTO_HDR_LEN + payload_len);
}

/* Walk NUL-terminated strings; see proto.h. */
int proto_next_string(const uint8_t *buf, size_t len, size_t *off, const char **str)
{
	const uint8_t *nul;

	if (*off >= len)
		return -EPROTO;
	nul = memchr(buf + *off, '\0', len - *off);
	if (nul == NULL)
		return -EPROTO;
	*str = (const char *)(buf + *off);
	*off = (size_t)(nul - buf) + 1;
	return 0;
}

/* Make a decoder empty; see proto.h. */
void proto_decoder_init(struct proto_decoder *d)
{
	memset(d, 0, sizeof(*d));
	d->why = "";
}

/* Free a decoder's buffer; see proto.h. */
void proto_decoder_free(struct proto_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
	d->buf_cap = 0;
}

/* Fail d with err and reason; returns err. */
static int proto_decoder_fail(struct proto_decoder *d, int err, const char *reason)
{
	d->err = err;
	d->why = reason;
	return err;
}

/* Feed bytes; see proto.h. */
int proto_decoder_feed(struct proto_decoder *d, const void *in, size_t len, size_t *used,
		       struct proto_frame *frame)
{
	const uint8_t *src = in;
	size_t pos = 0;
	int rc;

	*used = 0;
	if (d->err != 0)
		return d->err;
	if (d->frame_pending) {
		/* the previous frame was handed out: start the next one */
		d->frame_pending = 0;
		d->hdr_have = 0;
		d->buf_have = 0;
	}
	if (d->hdr_have < PROTO_HDR_LEN) {
		size_t n = PROTO_HDR_LEN - d->hdr_have;

		if (n > len)
			n = len;
		memcpy(d->hdr_bytes + d->hdr_have, src, n);
		d->hdr_have += (uint32_t)n;
		pos += n;
		*used = pos;
		if (d->hdr_have < PROTO_HDR_LEN)
			return 0;
		proto_hdr_decode(d->hdr_bytes, &d->hdr);
		rc = proto_hdr_check(&d->hdr, &d->why);
		if (rc < 0)
			return proto_decoder_fail(d, rc, d->why);
		if (d->hdr.len > d->buf_cap) {
			uint8_t *grown = realloc(d->buf, d->hdr.len);

			if (grown == NULL)
				return proto_decoder_fail(d, -ENOMEM, "out of memory");
			d->buf = grown;
			d->buf_cap = d->hdr.len;
		}
	}
	if (d->buf_have < d->hdr.len) {
		size_t n = d->hdr.len - d->buf_have;

		if (n > len - pos)
			n = len - pos;
		if (n > 0)
			memcpy(d->buf + d->buf_have, src + pos, n);
		d->buf_have += (uint32_t)n;
		pos += n;
		*used = pos;
		if (d->buf_have < d->hdr.len)
			return 0;
	}
	frame->hdr = d->hdr;
	frame->payload = d->buf;
	d->frame_pending = 1;
	return 1;
}

/* Why a decoder failed; see proto.h. */
const char *proto_decoder_error(const struct proto_decoder *d)
{
	return d->err != 0 ? d->why : "";
}
