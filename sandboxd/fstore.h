/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's part of the fleet's object store, between fleet_store.c (which opens it: the
 * store's settings, the workspace's keys) and the files that use it (fleet_store_xfer.c).
 */
#ifndef SANDBOXD_FSTORE_H
#define SANDBOXD_FSTORE_H

#include "fleet.h"
#include "store.h"

struct fstore {
	struct s3 s3;
	struct chunk_store cs;
	uint8_t secret[32];
	struct fleet_lease *lease; /* fstore_lease's, NULL for none */
};
/* On a worker: workspace's chunks in the store (the host's chunk cache in front): 0, or
 * -errno with err. */
int fstore_open(struct fstore *h, const char *workspace, char *err, size_t len);
/* Its lease and whatever it holds (fstore_unlease) let go, then closed. */
void fstore_close(struct fstore *h);
/* fleet_gc.c: before a push decides what it skips, the workspace's lease against the
 * collector (fleet/lease.c; waiting while a collection runs); its manifest is written only
 * while the lease is held. reader: a lazy restore's, which waits for nothing. A host out of a
 * fleet: none. 0 or -errno with err. */
int fstore_lease(struct fstore *h, const char *workspace, bool reader, char *err, size_t len);
/* On a worker: manifest of workspace deleted from the store (its chunks then named by one
 * manifest less: a collection takes those no other names). None there, or no store: 0. */
int fstore_forget(const char *workspace, const char *manifest, char *err, size_t len);
void fstore_unlease(struct fstore *h);

#endif
