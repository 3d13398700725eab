/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A download's answer (RFC 9110 section 14): the whole file (200), one range (206 with
 * Content-Range) of "bytes=a-b", "bytes=a-" or "bytes=-n", 416 for a start past the end, 304
 * for a matching If-None-Match, and If-Range (a stale validator gets the whole file). The
 * ETag is the file's size and mtime. Several ranges in one request get the whole file, as
 * RFC 9110 allows. The Range header's parser is range_parse.c (fuzzed without the loop).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto.h"
#include "sandboxd.h"

void range_reply(struct sd_req *q, char *data, uint64_t size, const struct proto_stat *st)
{
	char etag[64], lm[64], v[256], cr[96];
	time_t t = (time_t)st->mtime_sec;
	struct tm tm;

	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)st->size,
		 (unsigned long long)st->mtime_sec * 1000000000ull + st->mtime_nsec);
	gmtime_r(&t, &tm);
	strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	req_add_header(q, "etag:", etag);
	req_add_header(q, "last-modified:", lm);
	req_add_header(q, "accept-ranges:", "bytes");
	if (req_header(q, "if-none-match:", v, sizeof(v)) > 0 &&
	    (strcmp(v, etag) == 0 || strcmp(v, "*") == 0)) {
		free(data);
		req_reply_raw(q, 304, "application/octet-stream", NULL, 0);
		return;
	}
	bool ranged = req_header(q, "range:", v, sizeof(v)) > 0;
	char ifr[128];

	if (ranged && req_header(q, "if-range:", ifr, sizeof(ifr)) > 0 && strcmp(ifr, etag) != 0 &&
	    strcmp(ifr, lm) != 0)
		ranged = false; /* a stale validator: the whole file */
	uint64_t first, last;
	int r = ranged ? range_parse(v, size, &first, &last) : -ENOTSUP;

	if (r == -ERANGE) {
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		req_add_header(q, "content-range:", cr);
		free(data);
		req_reply_error(q, 416, "ReadError", "the range starts past the end of the file");
		return;
	}
	if (r < 0 || (first == 0 && last + 1 == size)) {
		/* HEAD: the size without the bytes (data NULL, len 0: headers say the size) */
		if (q->method == M_HEAD) {
			snprintf(cr, sizeof(cr), "%" PRIu64, size);
			req_add_header(q, "x-file-size:", cr);
		}
		req_reply_raw(q, 200, "application/octet-stream", data,
			      q->method == M_HEAD ? 0 : size);
		if (q->method == M_HEAD)
			q->head_len = size;
		return;
	}
	snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last, size);
	req_add_header(q, "content-range:", cr);
	if (q->method == M_HEAD) {
		req_reply_raw(q, 206, "application/octet-stream", data, 0);
		q->head_len = last - first + 1;
		return;
	}
	memmove(data, data + first, last - first + 1);
	req_reply_raw(q, 206, "application/octet-stream", data, last - first + 1);
}
