/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for wire/proto.c, the agent protocol's decoder: the input is what a hostile
 * client (or a hostile agent, for the host tools) sends. Its first byte chooses how the bytes
 * are cut into feeds (1 to 256 bytes at a time, as a socket might deliver them); the rest is
 * the stream. Every frame handed out must pass proto_hdr_check, and its payload is walked as
 * NUL-terminated strings the way the agent's handlers walk it, so a read past the payload is
 * an ASan report.
 *
 * Built and run by tests/fuzz/run.sh proto (clang -fsanitize=fuzzer,address,undefined); seeds
 * (valid streams: HELLO, PING, EXEC, STDIN, STAT) in tests/fuzz/corpus/proto/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Check one decoded frame as a receiver would use it. */
static void fuzz_check_frame(const struct proto_frame *f)
{
	size_t off = 0;
	const char *s;
	uint32_t min_len;

	if (proto_hdr_check(&f->hdr, NULL) != 0 || proto_type_min_len(f->hdr.type, &min_len) != 0 ||
	    f->hdr.len < min_len || f->hdr.len > PROTO_MAX_PAYLOAD)
		abort();
	if (f->hdr.len > 0 && f->payload == NULL)
		abort();
	while (proto_next_string(f->payload, f->hdr.len, &off, &s) == 0) {
		if (strlen(s) >= f->hdr.len)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_decoder d;
	size_t step, pos = 1;

	if (size == 0)
		return 0;
	step = (size_t)data[0] + 1;
	proto_decoder_init(&d);
	while (pos < size) {
		size_t n = size - pos < step ? size - pos : step;
		struct proto_frame f;
		size_t used = 0;
		int rc = proto_decoder_feed(&d, data + pos, n, &used, &f);

		if (used > n)
			abort();
		if (rc < 0) {
			if (proto_decoder_error(&d)[0] == '\0')
				abort();
			break;
		}
		if (rc == 1)
			fuzz_check_frame(&f);
		else if (used != n)
			abort();
		pos += used;
	}
	proto_decoder_free(&d);
	return 0;
}
