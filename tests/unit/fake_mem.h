/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fake guest RAM for unit tests: a host buffer laid out by mem_layout, no memfd, no KVM.
 * Up to FAKE_MEM_MALLOC_MAX bytes come from malloc, so ASan's redzones catch a write past the
 * end of RAM; larger guests (RAM above 4 GiB) get a MAP_NORESERVE anonymous mapping, where only
 * the pages a test touches cost memory.
 */
#ifndef SANDBOX_TEST_FAKE_MEM_H
#define SANDBOX_TEST_FAKE_MEM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "vmm.h"

#define KIB		    (1ull << 10)
#define MIB		    (1ull << 20)
#define GIB		    (1ull << 30)
#define FAKE_MEM_MALLOC_MAX (64 * MIB)

/* Lay out `ram_len` bytes of fresh RAM, every byte `fill`; the test fails if that is impossible. */
static inline uint8_t *fake_mem_create(struct guest_mem *mem, uint64_t ram_len, uint8_t fill)
{
	uint8_t *buf;

	if (ram_len <= FAKE_MEM_MALLOC_MAX) {
		buf = malloc(ram_len);
		cr_assert(buf != NULL, "malloc(%llu)", (unsigned long long)ram_len);
		memset(buf, fill, ram_len);
	} else {
		void *p = mmap(NULL, ram_len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		cr_assert(p != MAP_FAILED, "mmap(%llu)", (unsigned long long)ram_len);
		buf = p;
		/* Filling GiBs would touch every page: big guests start out zeroed. */
		cr_assert(fill == 0, "fake_mem_create: only small guests can be pre-filled");
	}
	mem_layout(mem, buf, ram_len);
	mem->fd = -1;
	return buf;
}

static inline void fake_mem_destroy(struct guest_mem *mem)
{
	if (mem->ram_len <= FAKE_MEM_MALLOC_MAX)
		free(mem->base);
	else
		munmap(mem->base, mem->ram_len);
	mem->base = NULL;
}

/* True when every byte of [p, p+len) is `byte`. */
static inline int fake_mem_all(const uint8_t *p, uint64_t len, uint8_t byte)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != byte)
			return 0;
	return 1;
}

#endif
