/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for sandboxd's router (sandboxd/route.c): a request's path as a hostile
 * client sends it. The first byte picks the method (its low 3 bits), the listener (bit 3: the
 * operator's) and whether the path goes through route_pct_decode first (bit 4); the rest is
 * the path. Checked beyond "no crash":
 *   route_pct_decode: 0 only for a string with no '%' left unaccounted for, never longer than
 *     what it was given, no NUL decoded into it; a path with no '%' is unchanged;
 *   route_parse: a kind within the enum; the operator's listener routes only /healthz and
 *     /metrics, the API's never them; R_NONE never method_ok; arg and rest NUL-terminated in
 *     their buffers; a route that names something has a non-empty arg, copied from the path;
 *     a box, snapshot or dataplane arg of one segment has no '/'; R_SERVICE's rest starts
 *     with '/'; the same input routes the same twice; route_name of the kind is a label with
 *     no character of a name in it beyond [a-z_].
 *
 * Built and run by tests/fuzz/run.sh sandboxd_route; seeds in tests/fuzz/corpus/sandboxd_route/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PATH_MAX_FUZZ 8192

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_sandboxd_route: %s:%d: %s\n", __FILE__, __LINE__,    \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static bool one_segment(enum route_kind k)
{
	return (k >= R_BOX && k <= R_BOX_COMMANDS) || k == R_SNAPSHOT || k == R_REGISTRY ||
	       (k >= R_DP_EXECUTE && k <= R_DP_TUNNEL) || k == R_FILE_LINK || k == R_SERVICE;
}

static void check_route(enum http_method m, const char *path, bool op)
{
	struct route r, again;
	enum route_kind k = route_parse(m, path, op, &r);

	fuzz_check(k == r.kind || k == R_NONE);
	fuzz_check((unsigned)k <= R_GC);
	if (k == R_NONE)
		fuzz_check(!r.method_ok);
	if (op)
		fuzz_check(k == R_NONE || k == R_HEALTHZ || k == R_METRICS || k == R_DRAIN ||
			   k == R_GC);
	else
		fuzz_check(k != R_HEALTHZ && k != R_METRICS && k != R_DRAIN && k != R_GC);
	fuzz_check(memchr(r.arg, 0, sizeof(r.arg)) != NULL);
	fuzz_check(memchr(r.rest, 0, sizeof(r.rest)) != NULL);
	if (k != R_NONE && (one_segment(k) || k == R_SNAPSHOT_BY_NAME)) {
		fuzz_check(r.arg[0] != 0);
		fuzz_check(strstr(path, r.arg) != NULL);
	}
	if (k != R_NONE && one_segment(k))
		fuzz_check(strchr(r.arg, '/') == NULL);
	if (k == R_SERVICE)
		fuzz_check(r.rest[0] == '/');
	fuzz_check(route_parse(m, path, op, &again) == k);
	fuzz_check(again.method_ok == r.method_ok && strcmp(again.arg, r.arg) == 0);
	const char *name = route_name(k);

	fuzz_check(name && name[0]);
	for (const char *p = name; *p; p++)
		fuzz_check((*p >= 'a' && *p <= 'z') || *p == '_');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[PATH_MAX_FUZZ + 1], orig[PATH_MAX_FUZZ + 1];

	if (size < 1 || size - 1 > PATH_MAX_FUZZ)
		return 0;
	enum http_method m = (enum http_method)(data[0] & 7);
	bool op = data[0] & 8, decode = data[0] & 16;
	size_t n = size - 1;

	memcpy(path, data + 1, n);
	path[n] = 0;
	memcpy(orig, path, n + 1);
	if (decode) {
		size_t before = strlen(path);

		if (route_pct_decode(path) < 0)
			return 0;
		size_t after = strlen(path);

		fuzz_check(after <= before);
		if (!strchr(orig, '%'))
			fuzz_check(strcmp(orig, path) == 0);
		/* each %XX became one byte: the length fell by two for each escape */
		size_t escapes = 0;

		for (const char *p = orig; (p = strchr(p, '%')); p += 3)
			escapes++;
		fuzz_check(after == before - 2 * escapes);
	}
	check_route(m, path, op);
	return 0;
}
