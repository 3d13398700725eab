/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore's memory pager (docs/fleet.md, "Lazy restore"), defined once for the VMM
 * (vmm/mem_pager.c) and the pager (store/pager.c). Self-contained, fixed-width little-endian
 * fields only.
 *
 * The VMM is started with --restore-memory-pager-fd FD, one end of a unix stream socket whose
 * other end the pager holds. The VMM makes the guest's RAM empty, registers it with a
 * userfaultfd (missing pages) and sends one struct pager_hello with that userfaultfd as
 * SCM_RIGHTS. From then on every first touch of a page, the guest's or the VMM's own, waits
 * until the pager has put the page in (UFFDIO_COPY or UFFDIO_ZEROPAGE). When every page is
 * in, the pager sends the one byte PAGER_DONE and closes its end. An EOF before it means the
 * pager died with pages still missing: the VMM stops the VM (a page it will never get must
 * not hang the guest, nor be read as zeros).
 *
 * Disk layers (version 2): the snapshot's layer files came with their headers and bitmaps
 * only. Before the VMM reads clusters of a read-only lower layer (not a raw image) the first
 * time, it sends a struct pager_want (the layer's id from its header, a range of the file,
 * whole clusters) and waits for the one byte PAGER_HAVE: the range is in the file. One want
 * is outstanding at a time. PAGER_DONE then also says that every layer is whole: the VMM asks
 * no more. A layer the pager does not know (not from the snapshot) is answered at once.
 */
#ifndef SANDBOX_PAGER_PROTO_H
#define SANDBOX_PAGER_PROTO_H

#include <stdint.h>

#define PAGER_MAGIC    0x47504253u /* "SBPG" in little-endian byte order */
#define PAGER_VERSION  2
#define PAGER_DONE     'D'
#define PAGER_HAVE     'H'
#define PAGER_WANT     0x544e4157u   /* "WANT" */
#define PAGER_WANT_MAX (64ull << 20) /* the longest range one want asks for */

struct pager_hello {
	uint32_t magic;
	uint32_t version;
	uint64_t ram_len; /* the guest's RAM, bytes: the snapshot's memory file's size */
	uint64_t base;	  /* where that RAM is in the VMM (the userfaultfd's addresses) */
};

struct pager_want {
	uint32_t magic; /* PAGER_WANT */
	uint32_t pad;
	uint8_t layer_id[16];
	uint64_t offset; /* in the layer's file */
	uint64_t len;	 /* at most PAGER_WANT_MAX */
};

#endif
