/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one file part of an upload's multipart/form-data body (RFC 7578): the boundary from the
 * Content-Type, the part named "file" (or the first part with a filename), its bytes up to the
 * next delimiter. No copy: the result points into the body. Fuzzed (fuzz_sandboxd).
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "sandboxd.h"

#define BOUNDARY_MAX  70 /* RFC 2046 */
#define PART_HEAD_MAX 8192

static const char *memmem_c(const char *h, size_t hl, const char *n, size_t nl)
{
	return memmem(h, hl, n, nl);
}

/* The boundary parameter of `ctype` into out (without quotes). */
static int boundary_of(const char *ctype, char *out, size_t len)
{
	if (strncasecmp(ctype, "multipart/form-data", 19) != 0)
		return -EINVAL;
	const char *p = strcasestr(ctype, "boundary=");

	if (!p)
		return -EINVAL;
	p += 9;
	bool quoted = *p == '"';

	if (quoted)
		p++;
	size_t n = 0;

	while (p[n] && (quoted ? p[n] != '"' : p[n] != ';' && p[n] != ' ' && p[n] != '\t'))
		n++;
	if (n == 0 || n > BOUNDARY_MAX || n >= len)
		return -EINVAL;
	memcpy(out, p, n);
	out[n] = 0;
	return 0;
}

int multipart_file(const char *ctype, const char *body, size_t len, const char **data, size_t *dlen)
{
	char b[BOUNDARY_MAX + 1], delim[BOUNDARY_MAX + 5];

	if (!body || boundary_of(ctype, b, sizeof(b)) < 0)
		return -EINVAL;
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "--%s", b);
	const char *end = body + len;
	const char *p = memmem_c(body, len, delim, dl);

	for (unsigned parts = 0; p && parts < 64; parts++) {
		p += dl;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return -EINVAL; /* the closing delimiter: no file part */
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			return -EINVAL;
		p += 2;
		const char *hend = memmem_c(
			p, (size_t)(end - p) < PART_HEAD_MAX ? (size_t)(end - p) : PART_HEAD_MAX,
			"\r\n\r\n", 4);

		if (!hend)
			return -EINVAL;
		/* The part's headers: is it the file? */
		bool is_file = false;

		for (const char *h = p; h < hend;) {
			const char *eol = memmem_c(h, (size_t)(hend - h) + 2, "\r\n", 2);
			size_t hl = (size_t)(eol - h);

			if (hl > 20 && strncasecmp(h, "content-disposition:", 20) == 0) {
				const char *nm = memmem_c(h, hl, "name=\"file\"", 11);
				const char *fn = memmem_c(h, hl, "filename=", 9);

				/* name="file" itself, not the end of filename="file" */
				if (nm && (nm == h || nm[-1] == ' ' || nm[-1] == ';'))
					is_file = true;
				else if (fn)
					is_file = true;
			}
			h = eol + 2;
		}
		const char *content = hend + 4;
		char next[BOUNDARY_MAX + 8];
		size_t nl = (size_t)snprintf(next, sizeof(next), "\r\n--%s", b);
		const char *stop = memmem_c(content, (size_t)(end - content), next, nl);

		if (!stop)
			return -EINVAL;
		if (is_file) {
			*data = content;
			*dlen = (size_t)(stop - content);
			return 0;
		}
		p = stop + 2;
	}
	return -EINVAL;
}
