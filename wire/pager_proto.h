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
 */
#ifndef SANDBOX_PAGER_PROTO_H
#define SANDBOX_PAGER_PROTO_H

#include <stdint.h>

#define PAGER_MAGIC   0x47504253u /* "SBPG" in little-endian byte order */
#define PAGER_VERSION 1
#define PAGER_DONE    'D'

struct pager_hello {
	uint32_t magic;
	uint32_t version;
	uint64_t ram_len; /* the guest's RAM, bytes: the snapshot's memory file's size */
	uint64_t base;	  /* where that RAM is in the VMM (the userfaultfd's addresses) */
};

#endif
