/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet's check programs' one way of saying a check: `ok NAME` on stdout, or
 * `FAIL NAME: why` and exit 1 (after check_on_fail, when a program set one: place-check
 * takes its host processes down with it).
 */
#ifndef SANDBOX_TESTS_FLEET_CHECK_H
#define SANDBOX_TESTS_FLEET_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static void (*check_on_fail)(void);

static void check(bool ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok %s\n", name);
		fflush(stdout);
		return;
	}
	printf("FAIL %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (check_on_fail)
		check_on_fail();
	exit(1);
}

#endif
