/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: one line per message on stderr, prefixed with the VM's id and the level. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "vmm.h"

static char log_id[64] = "sandbox-vmm";
static enum log_level log_min = LOG_INFO;

/* Logging configuration is process-wide: one VMM process serves one sandbox. */
void log_init(const char *id, enum log_level level)
{
	if (id)
		snprintf(log_id, sizeof(log_id), "%s", id);
	log_min = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warning", "error"};
	char line[512];
	va_list ap;
	int n;

	if (!log_enabled(level))
		return;
	if (level == LOG_DEBUG) {
		/* Debug lines carry the time since the first log call, for start-up profiles. */
		static struct timespec t0;
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!t0.tv_sec)
			t0 = now;
		n = snprintf(line, sizeof(line), "%s: debug: [%.3f ms] ", log_id,
			     (double)(now.tv_sec - t0.tv_sec) * 1e3 +
				     (double)(now.tv_nsec - t0.tv_nsec) / 1e6);
	} else {
		n = snprintf(line, sizeof(line), "%s: %s: ", log_id, names[level]);
	}
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One fputs per line so that lines from several threads do not interleave. */
	strncat(line, "\n", sizeof(line) - strlen(line) - 1);
	fputs(line, stderr);
}

bool log_enabled(enum log_level level)
{
	return level >= log_min;
}

uint64_t vmm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A fixed one-second window: at most `burst` messages pass per window. */
bool log_ratelimit_ok(struct log_ratelimit *rl, unsigned burst)
{
	uint64_t window = vmm_now_ns() / 1000000000ull;

	if (window != rl->window_ns) {
		rl->window_ns = window;
		rl->count = 0;
	}
	return rl->count++ < burst;
}
