/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers of the daemon: time, ids, the log. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sandboxd.h"

uint64_t sd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void sd_uuid(char out[SD_ID_LEN + 1])
{
	uint8_t b[16] = {0};

	if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
		/* getrandom does not fail for 16 bytes once the pool is up; a clock-based id is
		 * still unique on this host */
		uint64_t t = sd_now_ms();

		memcpy(b, &t, sizeof(t));
	}
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant */
	snprintf(out, SD_ID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		 b[15]);
}

void sd_iso(uint64_t ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	if (!ms || !gmtime_r(&s, &tm)) {
		out[0] = 0;
		return;
	}
	char t[96];

	snprintf(t, sizeof(t), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned)(ms % 1000));
	snprintf(out, 32, "%.31s", t);
}

void sd_log(const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printable(line, strlen(line), false);
	fprintf(stderr, "sandboxd: %s\n", line);
}
