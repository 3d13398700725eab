/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for tools/oci/oci_json.c, the strict JSON parser of an imported
 * image's index, manifests and config: the input is one document, hostile. It either parses
 * into a tree whose strings are NUL-terminated at their length and valid UTF-8, whose objects
 * have no key twice, within the depth and count bounds, or is refused with a message; never
 * a crash, a leak or a read past the input. The lookups the importer makes on the tree
 * (oci_json_get, oci_json_cstr, oci_json_u64) run on every node.
 *
 * Built and run by tests/fuzz/run.sh oci_json; seeds in tests/fuzz/corpus/oci_json/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_oci_json: %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* Valid UTF-8 (the parser's promise for every string it returns). */
static int utf8_ok(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = s[i], n = c < 0x80	   ? 1
				       : c >= 0xf0 ? 4
				       : c >= 0xe0 ? 3
				       : c >= 0xc2 ? 2
						   : 0;

		if (!n || n > len - i || c > 0xf4)
			return 0;
		for (unsigned k = 1; k < n; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
		i += n;
	}
	return 1;
}

static void walk(const struct oci_json *v, unsigned depth)
{
	uint64_t u;

	fuzz_check(depth <= OCI_JSON_DEPTH);
	if (v->type == OJ_STRING) {
		fuzz_check(v->str && v->str[v->len] == '\0');
		fuzz_check(utf8_ok((const unsigned char *)v->str, v->len));
		fuzz_check(!oci_json_cstr(v) || strlen(oci_json_cstr(v)) == v->len);
	}
	if (v->type == OJ_NUMBER)
		fuzz_check(v->str && v->len > 0 && strlen(v->str) == v->len);
	(void)oci_json_u64(v, UINT64_MAX, &u);
	if (v->type == OJ_OBJECT) {
		fuzz_check(v->n <= OCI_JSON_KEYS);
		for (size_t i = 0; i < v->n; i++) {
			fuzz_check(utf8_ok((const unsigned char *)v->keys[i], strlen(v->keys[i])));
			fuzz_check(oci_json_get(v, v->keys[i]) ==
				   &v->items[i]); /* keys are unique */
		}
	}
	if (v->type == OJ_ARRAY)
		fuzz_check(v->n <= OCI_JSON_ITEMS);
	for (size_t i = 0; (v->type == OJ_ARRAY || v->type == OJ_OBJECT) && i < v->n; i++)
		walk(&v->items[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	struct oci_msg m = {{0}};
	struct oci_json *v;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (oci_json_parse(copy, size, &v, &m) == 0) {
		fuzz_check(v);
		walk(v, 0);
		oci_json_free(v);
	} else {
		fuzz_check(!v && m.text[0]);
	}
	free(copy);
	return 0;
}
