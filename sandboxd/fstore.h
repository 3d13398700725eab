/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's part of the fleet's object store, between fleet_store.c (which opens it: the
 * store's settings, the workspace's keys) and the files that use it (fleet_store_xfer.c).
 */
#ifndef SANDBOXD_FSTORE_H
#define SANDBOXD_FSTORE_H

#include "store.h"

struct fstore {
	struct s3 s3;
	struct chunk_store cs;
	uint8_t secret[32];
};
/* On a worker: workspace's chunks in the store (the host's chunk cache in front): 0, or
 * -errno with err. */
int fstore_open(struct fstore *h, const char *workspace, char *err, size_t len);
void fstore_close(struct fstore *h);

#endif
