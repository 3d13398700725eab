/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON from clients, with our limits over jansson's: strict RFC 8259 and UTF-8 (jansson's own),
 * no duplicate keys, no NUL in a string (jansson refuses \u0000 without JSON_ALLOW_NUL),
 * integers within int64 (jansson refuses larger), and nesting at most SD_JSON_DEPTH_MAX.
 * jansson stops at its own depth of 2048 while parsing, so a body nested 10,000 deep never
 * recurses past that; the walk below enforces ours on what parsed.
 */
#include <string.h>

#include "sandboxd.h"

static bool depth_ok(json_t *v, unsigned depth)
{
	if (depth > SD_JSON_DEPTH_MAX)
		return false;
	if (json_is_object(v)) {
		const char *k;
		json_t *x;

		json_object_foreach(v, k, x) if (!depth_ok(x, depth + 1)) return false;
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;

		json_array_foreach(v, i, x) if (!depth_ok(x, depth + 1)) return false;
	}
	return true;
}

json_t *jsonx_parse(const char *text, size_t len, json_error_t *err)
{
	json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, err);

	if (!v)
		return NULL;
	if (!depth_ok(v, 1)) {
		json_decref(v);
		snprintf(err->text, sizeof(err->text), "nested deeper than %d", SD_JSON_DEPTH_MAX);
		return NULL;
	}
	return v;
}
