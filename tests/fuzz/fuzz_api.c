/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for vmm/api.c's parsing of a client's bytes (wire/api_proto.h): the input's
 * first byte chooses how the rest is cut into reads (1 to 256 bytes at a time), the rest is the
 * stream a client sends on api.sock. It is framed as api_conn_event frames it (a buffer of one
 * whole message, a header checked by api_msg_len before its payload is waited for), and every
 * SNAPSHOT payload goes through api_snapshot_parse: its strings must lie inside the payload,
 * each NUL-terminated there, and a refusal must say why. The requests are not carried out
 * (that would pause vCPUs and write snapshots where the input says).
 *
 * Built and run by tests/fuzz/run.sh api; seeds in tests/fuzz/corpus/api/.
 */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_proto.h"
#include "vmm.h"

#define FUZZ_MSG_MAX (sizeof(struct api_hdr) + API_PAYLOAD_MAX)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_api: %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* True when the string at s is NUL-terminated inside [base, base + len). */
static int fuzz_string_inside(const char *s, const uint8_t *base, uint32_t len)
{
	const uint8_t *p = (const uint8_t *)s;

	return p >= base && p < base + len && memchr(p, 0, (size_t)(base + len - p)) != NULL;
}

/* One whole message as api_handle would get it: its payload in a buffer of exactly its size. */
static void fuzz_message(const struct api_hdr *h, const uint8_t *payload_in)
{
	uint32_t len = le32toh(h->len);
	uint8_t *payload = malloc(len ? len : 1);
	struct snapshot_req sr;
	char msg[API_ERROR_MSG_MAX] = "";

	fuzz_check(payload != NULL);
	memcpy(payload, payload_in, len);
	if (le16toh(h->type) == API_SNAPSHOT) {
		fuzz_check(len >= sizeof(struct api_snapshot_req));
		if (api_snapshot_parse(payload, len, &sr, msg, sizeof(msg)) == 0) {
			fuzz_check(sr.ntops <= SNAP_TOPS_MAX);
			fuzz_check(fuzz_string_inside(sr.dir, payload, len));
			for (unsigned i = 0; i < sr.ntops; i++)
				fuzz_check(fuzz_string_inside(sr.new_tops[i], payload, len));
		} else {
			fuzz_check(msg[0] != '\0' && strnlen(msg, sizeof(msg)) < sizeof(msg));
		}
	}
	free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[FUZZ_MSG_MAX];
	size_t step, pos = 1;
	uint32_t have = 0;

	if (size == 0)
		return 0;
	step = (size_t)data[0] + 1;
	while (pos < size) {
		size_t n = size - pos < step ? size - pos : step;

		/* recv takes at most what the buffer has room for */
		if (n > sizeof(buf) - have)
			n = sizeof(buf) - have;
		memcpy(buf + have, data + pos, n);
		have += (uint32_t)n;
		pos += n;
		while (have >= sizeof(struct api_hdr)) {
			struct api_hdr h;
			int len;

			memcpy(&h, buf, sizeof(h));
			len = api_msg_len(&h);
			if (len < 0)
				return 0; /* the connection is closed */
			fuzz_check((size_t)len <= sizeof(buf) && (size_t)len >= sizeof(h));
			if (have < (uint32_t)len)
				break;
			fuzz_message(&h, buf + sizeof(h));
			have -= (uint32_t)len;
			memmove(buf, buf + len, have);
		}
	}
	return 0;
}
