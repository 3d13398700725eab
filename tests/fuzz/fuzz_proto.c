/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for wire/proto.c, the agent protocol's decoder: the input is what a hostile
 * client (or a hostile agent, for the host tools) sends. Its first byte chooses how the bytes
 * are cut into feeds (1 to 256 bytes at a time, as a socket might deliver them); the rest is
 * the stream. Every frame handed out must pass proto_hdr_check, and its payload is walked as
 * NUL-terminated strings the way the agent's handlers walk it, so a read past the payload is
 * an ASan report.
 *
 * Built and run by tests/fuzz/run.sh proto (clang -fsanitize=fuzzer,address,undefined). Built
 * with -DFUZZ_SEEDS instead, it is a program that writes a few valid streams as seeds.
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

#ifdef FUZZ_SEEDS
/* Append one frame to buf at *len. */
static void fuzz_seed_frame(uint8_t *buf, size_t *len, uint16_t type, uint64_t id,
			    const void *payload, uint32_t payload_len)
{
	long n = proto_frame_encode(buf + *len, 4096 - *len, type, id, payload, payload_len);

	if (n < 0)
		abort();
	*len += (size_t)n;
}

/* Write a few valid streams into the directory argv[1]. */
int main(int argc, char **argv)
{
	static const char exec_tail[] = "/tmp\0sh\0-c\0echo hi\0PATH=/bin";
	uint8_t exec[sizeof(struct proto_exec) + sizeof(exec_tail)] = {0};
	uint8_t hello[8], buf[4096], step;
	char path[4096];
	size_t len = 1;
	FILE *f;

	if (argc != 2)
		return 2;
	proto_put_le32(hello, PROTO_VERSION);
	proto_put_le32(hello + 4, PROTO_MAX_PAYLOAD);
	proto_put_le16(exec + offsetof(struct proto_exec, argc), 3);
	proto_put_le16(exec + offsetof(struct proto_exec, envc), 1);
	memcpy(exec + sizeof(struct proto_exec), exec_tail, sizeof(exec_tail));
	for (step = 0; step < 2; step++) {
		len = 1;
		buf[0] = step ? 0 : 255;
		fuzz_seed_frame(buf, &len, PROTO_MSG_HELLO, 0, hello, sizeof(hello));
		fuzz_seed_frame(buf, &len, PROTO_MSG_PING, 1, NULL, 0);
		fuzz_seed_frame(buf, &len, PROTO_MSG_EXEC, 2, exec, sizeof(exec));
		fuzz_seed_frame(buf, &len, PROTO_MSG_STDIN, 2, "data", 4);
		fuzz_seed_frame(buf, &len, PROTO_MSG_STAT, 3, "/etc", 5);
		snprintf(path, sizeof(path), "%s/seed-%u", argv[1], step);
		f = fopen(path, "wb");
		if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
			return 1;
	}
	return 0;
}
#endif
