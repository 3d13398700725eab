/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore's pager (wire/pager_proto.h; docs/fleet.md, "Lazy restore"): it takes the
 * userfaultfd a VMM sends for its empty guest RAM and fills that RAM from a source of chunks
 * (the fleet's store through a host's chunk cache; a file in the tests), the chunk of every
 * page the guest touches first, then, once told to (pager_prefetch), the rest in order. Each
 * chunk is put in whole, so a fault costs one fetch for chunk_size bytes of neighbours.
 *
 * A source that fails (a chunk missing or corrupt) ends the run with its message: the caller
 * stops the VMM, whose faulting vCPUs then never see the page (nothing half restored runs).
 */
#ifndef SANDBOX_PAGER_H
#define SANDBOX_PAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define PAGER_ERR_MAX 512

struct pager_src {
	/* Chunk i of the memory (chunk_size bytes, the last one perhaps fewer) into buf: 0,
	 * 1 when it is all zeros (buf untouched), or -errno with a message in err that names
	 * the chunk. Called on the pager's thread only. */
	int (*get)(void *arg, uint64_t i, uint8_t *buf, char *err, size_t err_len);
	void *arg;
	uint32_t chunk_size; /* a multiple of 4 KiB */
	/* NULL, or the bytes fetched for this memory ahead of the pager (a read-ahead into a
	 * cache) that get has not put in yet: what came from the store is these and what the
	 * pager put in. Called from any thread. */
	uint64_t (*unused_bytes)(void *arg);
	/* NULL, or called (by the caller of pager_prefetch, from its thread) once the restored
	 * guest answered: a read-ahead held to what it would touch first may go on. */
	void (*answered)(void *arg);
	/* NULL (no disk layers to fill), or the snapshot's disk layers: disk_get makes
	 * [off, off + len) of the layer whose header's id is id present in its file (0; a
	 * layer it does not know: 0 at once; or -errno with err naming the chunk), disk_next
	 * puts one more chunk of them in (1), or says they are whole (0). The pager's thread. */
	int (*disk_get)(void *arg, const uint8_t id[16], uint64_t off, uint64_t len, char *err,
			size_t err_len);
	int (*disk_next)(void *arg, char *err, size_t err_len);
};

struct pager {
	int sock, uffd;
	uint64_t base, ram_len, nchunks, filled;
	uint8_t *done; /* a byte a chunk: put in */
	uint8_t *buf;
	struct pager_src src;
	timer_t timer; /* ends a read that would wait (pager_run's thread's) */
	bool has_timer;
	int prefetch; /* (__atomic) set: fill the rest when no fault waits */
	/* what it did */
	uint64_t faults;		 /* page faults read */
	uint64_t fault_chunks;		 /* chunks put in for a fault */
	uint64_t prefetch_chunks;	 /* and ahead of one */
	uint64_t zero_chunks;		 /* of those, all zeros (nothing fetched) */
	uint64_t bytes;			 /* bytes of the chunks fetched (not zeros) */
	uint64_t bytes_at_prefetch;	 /* of those, fetched before pager_prefetch */
	uint64_t disk_wants;		 /* the VMM's asks for disk layers' ranges */
	uint64_t disk_wants_at_prefetch; /* of those, before pager_prefetch */
	uint64_t disk_fills;		 /* disk chunks put in by the fill after */
	bool disks_whole;
	uint8_t want[40]; /* a struct pager_want coming in, want_got bytes of it */
	size_t want_got;
	char err[PAGER_ERR_MAX];
};

/* Take the VMM's hello and userfaultfd from sock (bounded: timeout_ms), for RAM of exactly
 * ram_len bytes; p (zeroed by the caller) then owns sock. 0, or -errno with p->err (sock
 * closed): -ESRCH when the VMM went away before its hello. */
int pager_accept(struct pager *p, int sock, uint64_t ram_len, const struct pager_src *src,
		 unsigned timeout_ms) __attribute__((warn_unused_result));
/* Serve faults (and prefetch, once asked) until every chunk is in: then tell the VMM
 * (PAGER_DONE) and return 0. The VMM's wants of disk layers are served first of all, and
 * once every page is in, the layers are filled too (src.disk_next) before PAGER_DONE.
 * -ESRCH when the VMM went away first,
 * or the source's error (p->err names the chunk). */
int pager_run(struct pager *p) __attribute__((warn_unused_result));
/* From any thread: start filling what no fault asked for. */
void pager_prefetch(struct pager *p);
void pager_close(struct pager *p);

#endif
