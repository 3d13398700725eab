/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for sandboxd's JSON decoder (sandboxd/jsonx.c, jsonx_parse over jansson):
 * a request body or a WebSocket frame as a hostile client sends it (the whole input). Checked
 * beyond "no crash": a refusal says why; what parses is nested at most SD_JSON_DEPTH_MAX deep,
 * its strings hold no NUL (their length is their strlen) and are UTF-8, no object holds a key
 * twice, and written back compactly it parses again to an equal value. Each string quoted by
 * jsonx_quote (the command id in the frames sandboxd writes without jansson) parses back to
 * itself, and quoted into less room to a valid JSON string that begins it.
 *
 * Built and run by tests/fuzz/run.sh sandboxd_json; seeds in tests/fuzz/corpus/sandboxd_json/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_sandboxd_json: %s:%d: %s\n", __FILE__, __LINE__,     \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static bool utf8_ok(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i], len = c < 0x80	      ? 1
					 : (c & 0xe0) == 0xc0 ? 2
					 : (c & 0xf0) == 0xe0 ? 3
					 : (c & 0xf8) == 0xf0 ? 4
							      : 0;
		if (len == 0 || i + len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4))
			return false;
		for (unsigned j = 1; j < len; j++)
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
		if (len == 3 && c == 0xe0 && s[i + 1] < 0xa0)
			return false; /* overlong */
		if (len == 3 && c == 0xed && s[i + 1] >= 0xa0)
			return false; /* a surrogate */
		if (len == 4 && ((c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] >= 0x90)))
			return false;
		i += len;
	}
	return true;
}

/* jsonx_quote of s (n bytes): whole with 6n + 3 bytes of room, a prefix of it with less. */
static void quote_check(const char *s, size_t n)
{
	size_t cap = 6 * n + 3, small = 3 + n % 17;
	char *q = malloc(cap);
	json_error_t err;

	fuzz_check(q != NULL);
	fuzz_check(jsonx_quote(s, q, cap) == strlen(q));
	json_t *back = json_loads(q, JSON_DECODE_ANY, &err);

	fuzz_check(back && json_is_string(back) && strcmp(json_string_value(back), s) == 0);
	json_decref(back);
	if (small < cap) {
		fuzz_check(jsonx_quote(s, q, small) < small);
		back = json_loads(q, JSON_DECODE_ANY, &err);
		fuzz_check(back && json_is_string(back));
		fuzz_check(strncmp(json_string_value(back), s, json_string_length(back)) == 0);
		json_decref(back);
	}
	free(q);
}

static void walk(json_t *v, unsigned depth)
{
	fuzz_check(depth <= SD_JSON_DEPTH_MAX);
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		fuzz_check(strlen(s) == n);
		fuzz_check(utf8_ok((const unsigned char *)s, n));
		quote_check(s, n);
	} else if (json_is_object(v)) {
		const char *k;
		json_t *x;

		json_object_foreach(v, k, x)
		{
			fuzz_check(utf8_ok((const unsigned char *)k, strlen(k)));
			walk(x, depth + 1);
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;

		json_array_foreach(v, i, x) walk(x, depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t err;

	if (size > SD_JSON_BODY_MAX)
		return 0;
	memset(&err, 0, sizeof(err));
	json_t *v = jsonx_parse((const char *)data, size, &err);

	if (!v) {
		fuzz_check(err.text[0] != 0);
		return 0;
	}
	walk(v, 1);
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	fuzz_check(text != NULL);
	json_t *again = jsonx_parse(text, strlen(text), &err);

	fuzz_check(again != NULL);
	fuzz_check(json_equal(v, again));
	json_decref(again);
	free(text);
	json_decref(v);
	return 0;
}
