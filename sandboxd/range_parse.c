/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A download's Range header (RFC 9110 section 14.1.2) against the file's size: one range of
 * "bytes=a-b", "bytes=a-" or "bytes=-n" into [first, last], -ERANGE (416) for a start past
 * the end, -ENOTSUP for anything but one byte range (the whole file), -EINVAL for a malformed
 * one. No I/O: range.c answers with it, fuzz_sandboxd_body calls it alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

int range_parse(const char *v, uint64_t size, uint64_t *first, uint64_t *last)
{
	char *end;

	if (strncmp(v, "bytes=", 6) != 0 || strchr(v, ','))
		return -ENOTSUP; /* not a single byte range: the whole file */
	v += 6;
	if (*v == '-') {
		if (v[1] < '0' || v[1] > '9')
			return -EINVAL;
		uint64_t n = strtoull(v + 1, &end, 10);

		if (*end || n == 0)
			return -EINVAL;
		if (size == 0)
			return -ERANGE;
		*first = n >= size ? 0 : size - n;
		*last = size - 1;
		return 0;
	}
	if (*v < '0' || *v > '9')
		return -EINVAL;
	uint64_t a = strtoull(v, &end, 10), b;

	if (*end != '-')
		return -EINVAL;
	if (end[1] == 0) {
		b = size ? size - 1 : 0;
	} else {
		if (end[1] < '0' || end[1] > '9')
			return -EINVAL;
		b = strtoull(end + 1, &end, 10);
		if (*end || b < a)
			return -EINVAL;
	}
	if (a >= size)
		return -ERANGE;
	*first = a;
	*last = b >= size ? size - 1 : b;
	return 0;
}
