/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Port I/O and MMIO dispatch: a small table of ranges, searched linearly (there are a handful
 * of devices; a guest's exit cost is dominated by the exit itself).
 */
#include <errno.h>
#include <string.h>

#include "vmm.h"

int bus_register(struct bus *bus, uint64_t base, uint64_t len, bus_access_fn access, void *opaque,
		 const char *name)
{
	if (!access || len == 0 || base + len < base)
		return -EINVAL;
	if (bus->nranges == BUS_MAX_RANGES)
		return -ENOSPC;
	for (unsigned i = 0; i < bus->nranges; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (base < r->base + r->len && r->base < base + len)
			return -EBUSY;
	}
	bus->ranges[bus->nranges++] = (struct bus_range){
		.base = base, .len = len, .access = access, .opaque = opaque, .name = name};
	return 0;
}

void bus_unregister(struct bus *bus, const void *opaque)
{
	unsigned n = 0;

	for (unsigned i = 0; i < bus->nranges; i++)
		if (bus->ranges[i].opaque != opaque)
			bus->ranges[n++] = bus->ranges[i];
	bus->nranges = n;
}

bool bus_access(const struct bus *bus, uint64_t addr, uint8_t *data, uint32_t len, bool write)
{
	for (unsigned i = 0; i < bus->nranges; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (addr >= r->base && addr - r->base < r->len) {
			/* An access straddling the end of a range is refused as a whole. */
			if (len > r->len - (addr - r->base))
				break;
			r->access(r->opaque, addr - r->base, data, len, write);
			return true;
		}
	}
	if (!write)
		memset(data, 0xff, len);
	return false;
}
