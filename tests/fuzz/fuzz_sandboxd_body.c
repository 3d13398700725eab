/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the parsers of what an upload and a download carry (sandboxd/
 * multipart.c, range.c): the first byte picks, the rest is hostile input.
 *   0  an upload: "CONTENT-TYPE\0BODY". multipart_file finds the file part or refuses; what
 *      it finds lies inside the body, right after a part's "\r\n\r\n" and right before
 *      "\r\n--BOUNDARY", the boundary being the Content-Type's.
 *   1  a download's Range header for a file of the size in the next 8 bytes (little-endian,
 *      any value): range_parse gives 0 with first <= last < size, -ERANGE (416) only for a
 *      start at or past the end, -ENOTSUP (the whole file) only for what is not one
 *      "bytes=" range, else -EINVAL.
 * Never a crash, a leak, or a read past the input.
 *
 * Built and run by tests/fuzz/run.sh sandboxd_body; seeds in tests/fuzz/corpus/sandboxd_body/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandboxd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_sandboxd_body: %s:%d: %s\n", __FILE__, __LINE__,     \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define CTYPE_MAX 1024

static void upload(const uint8_t *in, size_t len)
{
	const uint8_t *nul = memchr(in, 0, len < CTYPE_MAX ? len : CTYPE_MAX);

	if (!nul)
		return;
	const char *ctype = (const char *)in;
	size_t blen = len - (size_t)(nul + 1 - in);
	/* The body in a buffer of its own size, so ASan sees a read past it. */
	char *body = malloc(blen ? blen : 1);
	const char *d = NULL;
	size_t dlen = 0;

	fuzz_check(body != NULL);
	memcpy(body, nul + 1, blen);
	if (multipart_file(ctype, body, blen, &d, &dlen) == 0) {
		fuzz_check(d >= body + 4 && d + dlen <= body + blen);
		fuzz_check(memcmp(d - 4, "\r\n\r\n", 4) == 0);
		const char *b = strcasestr(ctype, "boundary=");

		fuzz_check(b != NULL);
		b += 9;
		bool quoted = *b == '"';
		size_t bl = quoted ? strcspn(b + 1, "\"") : strcspn(b, "; \t");

		b += quoted;

		fuzz_check(blen - (size_t)(d + dlen - body) >= 4 + bl);
		fuzz_check(memcmp(d + dlen, "\r\n--", 4) == 0 && memcmp(d + dlen + 4, b, bl) == 0);
	}
	free(body);
}

static void range(const uint8_t *in, size_t len)
{
	uint64_t size = 0, first = 0, last = 0;
	char v[512];

	if (len < 8 || len - 8 >= sizeof(v))
		return;
	for (int i = 7; i >= 0; i--)
		size = size << 8 | in[i];
	memcpy(v, in + 8, len - 8);
	v[len - 8] = 0;
	int r = range_parse(v, size, &first, &last);
	bool one = strncmp(v, "bytes=", 6) == 0 && !strchr(v, ',');

	if (r == 0) {
		fuzz_check(one);
		fuzz_check(first <= last && last < size);
	} else if (r == -ERANGE) {
		fuzz_check(one);
		/* "bytes=A-..." with A at or past the end, or a suffix of an empty file */
		fuzz_check(size == 0 || v[6] != '-');
		if (v[6] != '-')
			fuzz_check(strtoull(v + 6, NULL, 10) >= size);
	} else if (r == -ENOTSUP) {
		fuzz_check(!one);
	} else {
		fuzz_check(r == -EINVAL && one);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] == 0)
		upload(data + 1, size - 1);
	else if (data[0] == 1)
		range(data + 1, size - 1);
	return 0;
}
