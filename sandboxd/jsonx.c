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

size_t jsonx_quote(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (cap < 3)
		return 0;
	out[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		char esc = *p == '"'	? '"'
			   : *p == '\\' ? '\\'
			   : *p == '\n' ? 'n'
			   : *p == '\r' ? 'r'
			   : *p == '\t' ? 't'
					: 0;
		size_t need = esc ? 2 : *p < 0x20 || *p == 0x7f ? 6 : 1;

		if (o + need + 2 > cap) { /* cut: no half escape, no half character */
			while (o > 1 && ((unsigned char)out[o - 1] & 0xc0) == 0x80)
				o--;
			if (o > 1 && ((unsigned char)out[o - 1] & 0xc0) == 0xc0)
				o--;
			break;
		}
		if (esc) {
			out[o++] = '\\';
			out[o++] = esc;
		} else if (need == 6) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[*p >> 4];
			out[o + 5] = hex[*p & 15];
			o += 6;
		} else {
			out[o++] = (char)*p;
		}
	}
	out[o++] = '"';
	out[o] = 0;
	return o;
}
