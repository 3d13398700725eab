/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a lazy restore's pull gives (box_lazy.c, and fleet_store.c's pull_lazy hook): the
 * pulled snapshot (a hidden directory: every file but its memory) and the pager's source of
 * that memory (store/pager.h). Apart from sandboxd.h, so that only these two see the pager.
 */
#ifndef SANDBOX_SANDBOXD_BOX_LAZY_H
#define SANDBOX_SANDBOXD_BOX_LAZY_H

#include "client.h"
#include "pager.h"

struct lazy_pull {
	char dir[4300];
	struct snap_meta m;
	struct pager_src src;
	void *store; /* the hooks' */
};

#endif
