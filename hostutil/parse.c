/* SPDX-License-Identifier: Apache-2.0 */
/* Decimal numbers from the command line, files and peers (hostutil.h). */
#include <errno.h>
#include <stdlib.h>

#include "hostutil.h"

bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}
