/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of wire/proto.c: frame round trips, frames fed byte by byte, oversized, unknown, short
 * and garbage frames, and the minimum length of every type.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* Feed all of buf to d, expecting exactly one frame at the very end. */
static void feed_one(struct proto_decoder *d, const uint8_t *buf, size_t len, size_t step,
		     struct proto_frame *f)
{
	size_t pos = 0;
	int frames = 0;

	while (pos < len) {
		size_t n = len - pos < step ? len - pos : step;
		size_t used = 0;
		int rc = proto_decoder_feed(d, buf + pos, n, &used, f);

		cr_assert(rc >= 0, "feed failed: %s", proto_decoder_error(d));
		pos += used;
		if (rc == 1) {
			frames++;
			cr_assert_eq(pos, len, "frame ended early at %zu of %zu", pos, len);
		} else {
			cr_assert_eq(used, n);
		}
	}
	cr_assert_eq(frames, 1);
}

Test(proto, header_layout_is_little_endian)
{
	struct proto_hdr h = {
		.len = 0x01020304, .type = 0x0506, .flags = 0, .id = 0x1122334455667788};
	static const uint8_t want[PROTO_HDR_LEN] = {4,	  3,	2,    1,    6,	  5,	0,    0,
						    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
	uint8_t out[PROTO_HDR_LEN];
	struct proto_hdr back;

	proto_hdr_encode(&h, out);
	cr_assert(memcmp(out, want, sizeof(want)) == 0);
	proto_hdr_decode(out, &back);
	cr_assert_eq(back.len, h.len);
	cr_assert_eq(back.type, h.type);
	cr_assert_eq(back.id, h.id);
}

Test(proto, round_trip_whole_and_byte_by_byte)
{
	static const size_t steps[] = {1, 3, 16, 17, 4096};
	uint8_t payload[1000], frame[PROTO_HDR_LEN + sizeof(payload)];
	struct proto_decoder d;
	struct proto_frame f;
	size_t i;
	long n;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	n = proto_frame_encode(frame, sizeof(frame), PROTO_MSG_STDOUT, 42, payload,
			       sizeof(payload));
	cr_assert_eq(n, (long)sizeof(frame));
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		proto_decoder_init(&d);
		feed_one(&d, frame, sizeof(frame), steps[i], &f);
		cr_assert_eq(f.hdr.type, PROTO_MSG_STDOUT);
		cr_assert_eq(f.hdr.id, 42);
		cr_assert_eq(f.hdr.len, sizeof(payload));
		cr_assert(memcmp(f.payload, payload, sizeof(payload)) == 0);
		proto_decoder_free(&d);
	}
}

Test(proto, many_frames_in_one_buffer)
{
	uint8_t buf[10 * (PROTO_HDR_LEN + 8)];
	struct proto_decoder d;
	size_t pos = 0, len = 0;
	int i, got = 0;

	for (i = 0; i < 10; i++) {
		uint8_t pong[8];
		long n;

		proto_put_le64(pong, (uint64_t)i * 1000);
		n = proto_frame_encode(buf + len, sizeof(buf) - len, PROTO_MSG_PONG, (uint64_t)i,
				       pong, sizeof(pong));
		cr_assert(n > 0);
		len += (size_t)n;
	}
	proto_decoder_init(&d);
	while (pos < len) {
		struct proto_frame f;
		size_t used;
		int rc = proto_decoder_feed(&d, buf + pos, len - pos, &used, &f);

		cr_assert_eq(rc, 1);
		cr_assert_eq(f.hdr.id, (uint64_t)got);
		cr_assert_eq(proto_get_le64(f.payload), (uint64_t)got * 1000);
		pos += used;
		got++;
	}
	cr_assert_eq(got, 10);
	proto_decoder_free(&d);
}

Test(proto, empty_payload)
{
	uint8_t frame[PROTO_HDR_LEN];
	struct proto_decoder d;
	struct proto_frame f;

	cr_assert_eq(proto_frame_encode(frame, sizeof(frame), PROTO_MSG_PING, 1, NULL, 0),
		     PROTO_HDR_LEN);
	proto_decoder_init(&d);
	feed_one(&d, frame, sizeof(frame), 1, &f);
	cr_assert_eq(f.hdr.len, 0);
	proto_decoder_free(&d);
}

/* Feed a header of (len, type, flags) and return the decoder's verdict. */
static int feed_header(struct proto_decoder *d, uint32_t len, uint16_t type, uint16_t flags)
{
	struct proto_hdr h = {.len = len, .type = type, .flags = flags, .id = 1};
	uint8_t bytes[PROTO_HDR_LEN];
	struct proto_frame f;
	size_t used;

	proto_hdr_encode(&h, bytes);
	proto_decoder_init(d);
	return proto_decoder_feed(d, bytes, sizeof(bytes), &used, &f);
}

Test(proto, oversized_is_refused_from_the_header)
{
	struct proto_decoder d;

	cr_assert_eq(feed_header(&d, PROTO_MAX_PAYLOAD + 1, PROTO_MSG_STDIN, 0), -EMSGSIZE);
	cr_assert_null(d.buf, "a buffer was allocated for a refused frame");
	cr_assert(strstr(proto_decoder_error(&d), "larger") != NULL);
	proto_decoder_free(&d);
	cr_assert_eq(feed_header(&d, UINT32_MAX, PROTO_MSG_DATA, 0), -EMSGSIZE);
	proto_decoder_free(&d);
	/* exactly the maximum is fine (0: waiting for its payload) */
	cr_assert_eq(feed_header(&d, PROTO_MAX_PAYLOAD, PROTO_MSG_DATA, 0), 0);
	proto_decoder_free(&d);
}

Test(proto, unknown_type_and_flags)
{
	struct proto_decoder d;

	cr_assert_eq(feed_header(&d, 0, 0, 0), -EBADMSG);
	proto_decoder_free(&d);
	cr_assert_eq(feed_header(&d, 0, PROTO_MSG_MAX + 1, 0), -EBADMSG);
	proto_decoder_free(&d);
	cr_assert_eq(feed_header(&d, 0, 0xffff, 0), -EBADMSG);
	proto_decoder_free(&d);
	cr_assert_eq(feed_header(&d, 0, PROTO_MSG_PING, 1), -EPROTO);
	proto_decoder_free(&d);
}

Test(proto, every_minimum_length)
{
	struct proto_decoder d;
	unsigned int t;
	int known = 0;

	for (t = 0; t <= PROTO_MSG_MAX + 1; t++) {
		uint32_t min_len;

		if (proto_type_min_len((uint16_t)t, &min_len) < 0) {
			cr_assert_null(proto_type_name((uint16_t)t));
			continue;
		}
		known++;
		cr_assert_not_null(proto_type_name((uint16_t)t));
		if (min_len > 0) {
			cr_assert_eq(feed_header(&d, min_len - 1, (uint16_t)t, 0), -EPROTO,
				     "%s accepted %u bytes", proto_type_name((uint16_t)t),
				     min_len - 1);
			proto_decoder_free(&d);
		}
		cr_assert_eq(feed_header(&d, min_len, (uint16_t)t, 0), min_len == 0 ? 1 : 0);
		proto_decoder_free(&d);
	}
	cr_assert_eq(known, PROTO_MSG_MAX);
}

Test(proto, minimums_match_the_structs)
{
	static const struct {
		uint16_t type;
		uint32_t len;
	} want[] = {
		{PROTO_MSG_HELLO, sizeof(struct proto_hello)},
		{PROTO_MSG_PONG, sizeof(struct proto_pong)},
		{PROTO_MSG_EXEC, sizeof(struct proto_exec)},
		{PROTO_MSG_STARTED, sizeof(struct proto_started)},
		{PROTO_MSG_EXIT, sizeof(struct proto_exit)},
		{PROTO_MSG_RESIZE, sizeof(struct proto_winsize)},
		{PROTO_MSG_SIGNAL, sizeof(struct proto_signal)},
		{PROTO_MSG_ERROR, sizeof(struct proto_error)},
		{PROTO_MSG_FILE_WRITE, sizeof(struct proto_file_write)},
		{PROTO_MSG_STAT_REPLY, sizeof(struct proto_stat)},
		{PROTO_MSG_DIRENT, sizeof(struct proto_stat)},
		{PROTO_MSG_MKDIR, sizeof(struct proto_mkdir)},
		{PROTO_MSG_REMOVE, sizeof(struct proto_remove)},
		{PROTO_MSG_SHUTDOWN, sizeof(struct proto_shutdown)},
		{PROTO_MSG_SET_CLOCK, sizeof(struct proto_set_clock)},
	};
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint32_t min_len = 0;

		cr_assert_eq(proto_type_min_len(want[i].type, &min_len), 0);
		cr_assert_eq(min_len, want[i].len, "%s", proto_type_name(want[i].type));
	}
}

Test(proto, truncated_frame_waits)
{
	uint8_t frame[PROTO_HDR_LEN + 8];
	struct proto_decoder d;
	struct proto_frame f;
	size_t used;

	cr_assert(proto_frame_encode(frame, sizeof(frame), PROTO_MSG_PONG, 1, "12345678", 8) > 0);
	proto_decoder_init(&d);
	cr_assert_eq(proto_decoder_feed(&d, frame, sizeof(frame) - 1, &used, &f), 0);
	cr_assert_eq(used, sizeof(frame) - 1);
	cr_assert_eq(proto_decoder_feed(&d, frame + sizeof(frame) - 1, 1, &used, &f), 1);
	cr_assert_eq(used, 1);
	proto_decoder_free(&d);
}

Test(proto, garbage_fails_and_stays_failed)
{
	uint8_t junk[4096];
	struct proto_decoder d;
	struct proto_frame f;
	size_t used, i;
	int rc = 0;

	srand(1);
	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	junk[2] = 0xff; /* a length far above the maximum */
	proto_decoder_init(&d);
	rc = proto_decoder_feed(&d, junk, sizeof(junk), &used, &f);
	cr_assert(rc < 0);
	cr_assert_eq(proto_decoder_feed(&d, junk, sizeof(junk), &used, &f), rc);
	cr_assert_eq(used, 0);
	proto_decoder_free(&d);
}

Test(proto, encode_refuses_what_does_not_fit)
{
	uint8_t small[PROTO_HDR_LEN + 3];

	cr_assert_eq(proto_frame_encode(small, sizeof(small), PROTO_MSG_DATA, 1, "abcd", 4),
		     -EMSGSIZE);
	cr_assert_eq(proto_frame_encode(small, sizeof(small), PROTO_MSG_DATA, 1, NULL,
					PROTO_MAX_PAYLOAD + 1),
		     -EMSGSIZE);
}

Test(proto, strings)
{
	static const uint8_t buf[] = "cwd\0argv0\0\0tail";
	const char *s;
	size_t off = 0;

	cr_assert_eq(proto_next_string(buf, sizeof(buf) - 1, &off, &s), 0);
	cr_assert_str_eq(s, "cwd");
	cr_assert_eq(proto_next_string(buf, sizeof(buf) - 1, &off, &s), 0);
	cr_assert_str_eq(s, "argv0");
	cr_assert_eq(proto_next_string(buf, sizeof(buf) - 1, &off, &s), 0);
	cr_assert_str_eq(s, "");
	cr_assert_eq(proto_next_string(buf, sizeof(buf) - 1, &off, &s), -EPROTO); /* "tail" */
}
