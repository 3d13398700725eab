/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A strict JSON parser (RFC 8259) for the index, manifests and configs of an imported image
 * (oci.h). Strict because the archive is hostile and two readers must never see two meanings:
 * only UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), escapes checked
 * (\uD800-\uDFFF only as a pair), numbers by the grammar, a key given twice in one object
 * refused, nothing but whitespace after the value. Bounded: the document's size, the nesting
 * depth, the members of a container and the values in all (OCI_JSON_*); a key given twice is
 * found through a keyed hash of the object's keys, not by comparing each with all before.
 * Recursive descent; the depth bound bounds the stack.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

struct jp {
	const char *s;
	size_t len, pos;
	size_t nodes;
	struct oci_msg *m;
	uint64_t key[2]; /* of the keys' hash (oci_hash), drawn for the first large object */
	bool keyed;
};

/* An object's keys so far, for "a key given twice": a table of their indices (plus one) into
 * the object's keys, made from the 16th key on; keyed, so that no document can make its keys
 * collide (a linear scan per key made an object of 4096 keys cost 8 million compares). */
struct keyset {
	uint32_t *slot;
	size_t cap;
};

/* Is `key` among the `n` keys before it? Else it is recorded as keys[n], to be. */
static int keyset_seen(struct jp *p, struct keyset *ks, char *const *keys, size_t n,
		       const char *key)
{
	size_t i;

	if (n < 16) {
		for (i = 0; i < n; i++)
			if (strcmp(keys[i], key) == 0)
				return 1;
		return 0;
	}
	if (!p->keyed) {
		int err = oci_hash_key(p->key);

		if (err < 0)
			return err;
		p->keyed = true;
	}
	if (2 * (n + 1) > ks->cap) {
		size_t cap = 64;

		while (cap < 4 * (n + 1))
			cap *= 2;
		free(ks->slot);
		if (!(ks->slot = calloc(cap, sizeof(*ks->slot))))
			return -ENOMEM;
		ks->cap = cap;
		for (size_t j = 0; j < n; j++) {
			i = oci_hash(p->key, keys[j], strlen(keys[j])) & (cap - 1);
			while (ks->slot[i])
				i = (i + 1) & (cap - 1);
			ks->slot[i] = (uint32_t)j + 1;
		}
	}
	for (i = oci_hash(p->key, key, strlen(key)) & (ks->cap - 1); ks->slot[i];
	     i = (i + 1) & (ks->cap - 1))
		if (strcmp(keys[ks->slot[i] - 1], key) == 0)
			return 1;
	ks->slot[i] = (uint32_t)n + 1;
	return 0;
}

int oci_fail(struct oci_msg *m, int err, const char *fmt, ...)
{
	va_list ap;

	if (m && !m->text[0]) {
		va_start(ap, fmt);
		vsnprintf(m->text, sizeof(m->text), fmt, ap);
		va_end(ap);
	}
	return err;
}

static int jp_fail(struct jp *p, const char *what)
{
	return oci_fail(p->m, -EBADMSG, "bad JSON at byte %zu: %s", p->pos, what);
}

static void jp_ws(struct jp *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

/* Append `n` bytes to a growing buffer. */
static int buf_put(char **buf, size_t *len, size_t *cap, const void *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		char *b;

		while (c < *len + n + 1)
			c *= 2;
		if (!(b = realloc(*buf, c)))
			return -ENOMEM;
		*buf = b;
		*cap = c;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* The length of the valid UTF-8 sequence at s (of at most `left` bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	unsigned c = s[0];
	size_t n;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static int hex4(struct jp *p, unsigned *out)
{
	unsigned v = 0;

	if (p->len - p->pos < 4)
		return jp_fail(p, "a short \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos++];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return jp_fail(p, "a bad \\u escape");
	}
	*out = v;
	return 0;
}

/* A string (p at its opening quote) into a malloc'ed, NUL-terminated buffer. */
static int jp_string(struct jp *p, char **out, size_t *out_len)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int err = 0;

	p->pos++; /* the quote */
	for (;;) {
		unsigned char c;

		if (p->pos >= p->len) {
			err = jp_fail(p, "an unterminated string");
			break;
		}
		c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20) {
			err = jp_fail(p, "a control character in a string");
			break;
		}
		if (c == '\\') {
			char e, u8[4];
			unsigned cp, lo;
			size_t n;

			if (++p->pos >= p->len) {
				err = jp_fail(p, "an unterminated escape");
				break;
			}
			e = p->s[p->pos++];
			switch (e) {
			case '"':
			case '\\':
			case '/':
				u8[0] = e;
				n = 1;
				break;
			case 'b':
				u8[0] = '\b', n = 1;
				break;
			case 'f':
				u8[0] = '\f', n = 1;
				break;
			case 'n':
				u8[0] = '\n', n = 1;
				break;
			case 'r':
				u8[0] = '\r', n = 1;
				break;
			case 't':
				u8[0] = '\t', n = 1;
				break;
			case 'u':
				if ((err = hex4(p, &cp)) < 0)
					goto out;
				if (cp >= 0xdc00 && cp <= 0xdfff) {
					err = jp_fail(p, "a lone low surrogate");
					goto out;
				}
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (p->len - p->pos < 2 || p->s[p->pos] != '\\' ||
					    p->s[p->pos + 1] != 'u') {
						err = jp_fail(p, "a lone high surrogate");
						goto out;
					}
					p->pos += 2;
					if ((err = hex4(p, &lo)) < 0)
						goto out;
					if (lo < 0xdc00 || lo > 0xdfff) {
						err = jp_fail(
							p, "a high surrogate without its low one");
						goto out;
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (cp < 0x80) {
					u8[0] = (char)cp, n = 1;
				} else if (cp < 0x800) {
					u8[0] = (char)(0xc0 | cp >> 6);
					u8[1] = (char)(0x80 | (cp & 0x3f));
					n = 2;
				} else if (cp < 0x10000) {
					u8[0] = (char)(0xe0 | cp >> 12);
					u8[1] = (char)(0x80 | (cp >> 6 & 0x3f));
					u8[2] = (char)(0x80 | (cp & 0x3f));
					n = 3;
				} else {
					u8[0] = (char)(0xf0 | cp >> 18);
					u8[1] = (char)(0x80 | (cp >> 12 & 0x3f));
					u8[2] = (char)(0x80 | (cp >> 6 & 0x3f));
					u8[3] = (char)(0x80 | (cp & 0x3f));
					n = 4;
				}
				break;
			default:
				p->pos--;
				err = jp_fail(p, "a bad escape");
				goto out;
			}
			if ((err = buf_put(&buf, &len, &cap, u8, n)) < 0)
				goto out;
			continue;
		}
		{
			size_t n = utf8_len((const unsigned char *)p->s + p->pos, p->len - p->pos);

			if (!n) {
				err = jp_fail(p, "invalid UTF-8");
				break;
			}
			if ((err = buf_put(&buf, &len, &cap, p->s + p->pos, n)) < 0)
				break;
			p->pos += n;
		}
	}
out:
	if (err < 0) {
		free(buf);
		return err;
	}
	if (!buf && (err = buf_put(&buf, &len, &cap, "", 0)) < 0)
		return err;
	*out = buf;
	*out_len = len;
	return 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int jp_number(struct jp *p, struct oci_json *v)
{
	size_t start = p->pos;

	if (p->pos < p->len && p->s[p->pos] == '-')
		p->pos++;
	if (p->pos >= p->len || !is_digit(p->s[p->pos]))
		return jp_fail(p, "a bad number");
	if (p->s[p->pos] == '0')
		p->pos++;
	else
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return jp_fail(p, "a bad fraction");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->s[p->pos]))
			return jp_fail(p, "a bad exponent");
		while (p->pos < p->len && is_digit(p->s[p->pos]))
			p->pos++;
	}
	if (p->pos - start > 64)
		return jp_fail(p, "a number of more than 64 characters");
	v->type = OJ_NUMBER;
	v->len = p->pos - start;
	if (!(v->str = strndup(p->s + start, v->len)))
		return -ENOMEM;
	return 0;
}

static void json_clear(struct oci_json *v);

static int jp_value(struct jp *p, struct oci_json *v, unsigned depth);

/* An array or an object, p at its bracket. */
static int jp_members(struct jp *p, struct oci_json *v, unsigned depth, bool object,
		      struct keyset *ks)
{
	size_t cap = 0;
	char close = object ? '}' : ']';
	int err;

	if (depth >= OCI_JSON_DEPTH)
		return jp_fail(p, "nested too deep");
	v->type = object ? OJ_OBJECT : OJ_ARRAY;
	p->pos++;
	jp_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		size_t klen;

		jp_ws(p);
		if (object) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return jp_fail(p, "a key expected");
			if ((err = jp_string(p, &key, &klen)) < 0)
				return err;
			if (strlen(key) != klen) {
				free(key);
				return jp_fail(p, "a NUL in a key");
			}
			if ((err = keyset_seen(p, ks, v->keys, v->n, key)) != 0) {
				free(key);
				return err < 0 ? err : jp_fail(p, "a key given twice");
			}
			jp_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':') {
				free(key);
				return jp_fail(p, "':' expected");
			}
			p->pos++;
		}
		if (v->n == (object ? OCI_JSON_KEYS : OCI_JSON_ITEMS)) {
			free(key);
			return jp_fail(p, "too many members");
		}
		if (v->n == cap) {
			size_t c = cap ? cap * 2 : 8;
			struct oci_json *items = realloc(v->items, c * sizeof(*items));
			char **keys;

			if (!items) {
				free(key);
				return -ENOMEM;
			}
			v->items = items;
			if (object) {
				if (!(keys = realloc(v->keys, c * sizeof(*keys)))) {
					free(key);
					return -ENOMEM;
				}
				v->keys = keys;
			}
			cap = c;
		}
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		if (object)
			v->keys[v->n] = key;
		v->n++;
		if ((err = jp_value(p, &v->items[v->n - 1], depth + 1)) < 0)
			return err;
		jp_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return jp_fail(p, object ? "',' or '}' expected" : "',' or ']' expected");
	}
}

static int jp_container(struct jp *p, struct oci_json *v, unsigned depth, bool object)
{
	struct keyset ks = {0};
	int err = jp_members(p, v, depth, object, &ks);

	free(ks.slot);
	return err;
}

static int jp_literal(struct jp *p, const char *word, enum oci_json_type type, struct oci_json *v)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
		return jp_fail(p, "an unexpected character");
	p->pos += n;
	v->type = type;
	return 0;
}

static int jp_value(struct jp *p, struct oci_json *v, unsigned depth)
{
	jp_ws(p);
	if (++p->nodes > OCI_JSON_NODES)
		return jp_fail(p, "too many values");
	if (p->pos >= p->len)
		return jp_fail(p, "a value expected");
	switch (p->s[p->pos]) {
	case '{':
		return jp_container(p, v, depth, true);
	case '[':
		return jp_container(p, v, depth, false);
	case '"':
		v->type = OJ_STRING;
		return jp_string(p, &v->str, &v->len);
	case 't':
		return jp_literal(p, "true", OJ_TRUE, v);
	case 'f':
		return jp_literal(p, "false", OJ_FALSE, v);
	case 'n':
		return jp_literal(p, "null", OJ_NULL, v);
	default:
		return jp_number(p, v);
	}
}

static void json_clear(struct oci_json *v)
{
	for (size_t i = 0; i < v->n; i++) {
		if (v->items)
			json_clear(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

void oci_json_free(struct oci_json *v)
{
	if (v) {
		json_clear(v);
		free(v);
	}
}

int oci_json_parse(const char *text, size_t len, struct oci_json **out, struct oci_msg *m)
{
	struct jp p = {.s = text, .len = len, .m = m};
	struct oci_json *v;
	int err;

	*out = NULL;
	if (len > OCI_JSON_MAX)
		return oci_fail(m, -EFBIG, "JSON of %zu bytes (at most %u)", len, OCI_JSON_MAX);
	if (!(v = calloc(1, sizeof(*v))))
		return -ENOMEM;
	err = jp_value(&p, v, 0);
	if (err == 0) {
		jp_ws(&p);
		if (p.pos != p.len)
			err = jp_fail(&p, "more after the value");
	}
	if (err < 0) {
		oci_json_free(v);
		return err == -ENOMEM ? oci_fail(m, err, "out of memory") : err;
	}
	*out = v;
	return 0;
}

const struct oci_json *oci_json_get(const struct oci_json *v, const char *key)
{
	if (!v || v->type != OJ_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->keys[i], key) == 0)
			return &v->items[i];
	return NULL;
}

const char *oci_json_cstr(const struct oci_json *v)
{
	if (!v || v->type != OJ_STRING || strlen(v->str) != v->len)
		return NULL;
	return v->str;
}

bool oci_json_u64(const struct oci_json *v, uint64_t max, uint64_t *out)
{
	uint64_t r = 0;

	if (!v || v->type != OJ_NUMBER || v->len == 0)
		return false;
	for (size_t i = 0; i < v->len; i++) {
		unsigned d;

		if (!is_digit(v->str[i]))
			return false; /* a sign, a fraction, an exponent */
		d = (unsigned)(v->str[i] - '0');
		if (r > (max - d) / 10)
			return false;
		r = r * 10 + d;
	}
	*out = r;
	return true;
}
