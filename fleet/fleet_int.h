/* SPDX-License-Identifier: Apache-2.0 */
/* What the fleet's files share and nobody else needs. */
#ifndef SANDBOX_FLEET_INT_H
#define SANDBOX_FLEET_INT_H

#include "fleet.h"

int fleet_fail(struct fleet *f, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint64_t fleet_now_ms(void);

#endif
