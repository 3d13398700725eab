/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/bus.c: port I/O and MMIO range registration and dispatch. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "vmm.h"

/* A device that records its last access and answers reads with 0x10, 0x11, ... */
struct recorder {
	unsigned calls;
	uint64_t offset;
	uint32_t len;
	bool write;
	uint8_t data[8];
};

static void recorder_access(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool write)
{
	struct recorder *r = opaque;

	r->calls++;
	r->offset = offset;
	r->len = len;
	r->write = write;
	cr_assert(le(u32, len, sizeof(r->data)));
	if (write) {
		memcpy(r->data, data, len);
	} else {
		for (uint32_t i = 0; i < len; i++)
			data[i] = (uint8_t)(0x10 + i);
	}
}

static void bus_init(struct bus *bus)
{
	memset(bus, 0, sizeof(*bus));
}

Test(bus, register_and_refuse_overlaps)
{
	struct bus bus;
	struct recorder a = {0};

	bus_init(&bus);
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, recorder_access, &a, "uart"), 0));
	cr_assert(eq(u32, bus.nranges, 1));
	cr_assert(eq(u64, bus.ranges[0].base, 0x3f8));
	cr_assert(eq(u64, bus.ranges[0].len, 8));
	cr_assert(eq(ptr, bus.ranges[0].opaque, &a));
	cr_assert(eq(str, (char *)bus.ranges[0].name, "uart"));

	/* Every kind of overlap with [0x3f8, 0x400). */
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, recorder_access, &a, "same"), -EBUSY));
	cr_assert(eq(int, bus_register(&bus, 0x3f0, 9, recorder_access, &a, "first"), -EBUSY));
	cr_assert(eq(int, bus_register(&bus, 0x3ff, 1, recorder_access, &a, "last"), -EBUSY));
	cr_assert(eq(int, bus_register(&bus, 0x3ff, 0x100, recorder_access, &a, "tail"), -EBUSY));
	cr_assert(eq(int, bus_register(&bus, 0x3fa, 2, recorder_access, &a, "inside"), -EBUSY));
	cr_assert(eq(int, bus_register(&bus, 0, 0x1000, recorder_access, &a, "around"), -EBUSY));
	cr_assert(eq(u32, bus.nranges, 1), "a refused range was added");

	/* Touching at either end is not overlapping. */
	cr_assert(eq(int, bus_register(&bus, 0x3f0, 8, recorder_access, &a, "below"), 0));
	cr_assert(eq(int, bus_register(&bus, 0x400, 8, recorder_access, &a, "above"), 0));
	cr_assert(eq(u32, bus.nranges, 3));
}

Test(bus, register_refuses_bad_ranges)
{
	struct bus bus;
	struct recorder a = {0};

	bus_init(&bus);
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 0, recorder_access, &a, "empty"), -EINVAL));
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, NULL, &a, "no handler"), -EINVAL));
	cr_assert(
		eq(int, bus_register(&bus, UINT64_MAX, 2, recorder_access, &a, "wraps"), -EINVAL));
	cr_assert(eq(int, bus_register(&bus, 0x1000, UINT64_MAX, recorder_access, &a, "wraps"),
		     -EINVAL));
	cr_assert(eq(int,
		     bus_register(&bus, UINT64_MAX - 0xfff, 0x2000, recorder_access, &a, "wraps"),
		     -EINVAL));
	cr_assert(eq(u32, bus.nranges, 0));
	/* The largest range that does not wrap. */
	cr_assert(eq(int, bus_register(&bus, 0, UINT64_MAX, recorder_access, &a, "all"), 0));
}

/* A wrapping range would make the overlap test wrong for everything after it. */
Test(bus, wrapped_range_cannot_shadow_others)
{
	struct bus bus;
	struct recorder a = {0}, b = {0};

	bus_init(&bus);
	cr_assert(eq(int, bus_register(&bus, 0x1000, 0x10, recorder_access, &a, "a"), 0));
	cr_assert(eq(int, bus_register(&bus, UINT64_MAX - 0x10, 0x1020, recorder_access, &b, "b"),
		     -EINVAL));
	cr_assert(eq(int, bus_register(&bus, 0xfff8, 0x10, recorder_access, &b, "b"), 0));
}

Test(bus, table_full)
{
	struct bus bus;
	struct recorder a = {0};

	bus_init(&bus);
	for (unsigned i = 0; i < BUS_MAX_RANGES; i++)
		cr_assert(
			eq(int, bus_register(&bus, 0x100 * i, 0x10, recorder_access, &a, "r"), 0));
	cr_assert(eq(int, bus_register(&bus, 0x10000, 0x10, recorder_access, &a, "r"), -ENOSPC));
	cr_assert(eq(u32, bus.nranges, BUS_MAX_RANGES));
}

Test(bus, dispatch_with_offset)
{
	struct bus bus;
	struct recorder uart = {0}, kbd = {0};
	uint8_t data[4] = {0xaa, 0xbb, 0xcc, 0xdd};

	bus_init(&bus);
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, recorder_access, &uart, "uart"), 0));
	cr_assert(eq(int, bus_register(&bus, 0x60, 5, recorder_access, &kbd, "i8042"), 0));

	cr_assert(bus_access(&bus, 0x3fd, data, 1, true));
	cr_assert(eq(u32, uart.calls, 1));
	cr_assert(eq(u64, uart.offset, 5));
	cr_assert(eq(u32, uart.len, 1));
	cr_assert(eq(int, uart.write, true));
	cr_assert(eq(u8, uart.data[0], 0xaa));
	cr_assert(eq(u32, kbd.calls, 0));

	cr_assert(bus_access(&bus, 0x64, data, 1, false));
	cr_assert(eq(u32, kbd.calls, 1));
	cr_assert(eq(u64, kbd.offset, 4));
	cr_assert(eq(int, kbd.write, false));
	cr_assert(eq(u8, data[0], 0x10));

	/* First and last byte of a range, and a whole-range access. */
	cr_assert(bus_access(&bus, 0x3f8, data, 1, false));
	cr_assert(eq(u64, uart.offset, 0));
	cr_assert(bus_access(&bus, 0x3ff, data, 1, false));
	cr_assert(eq(u64, uart.offset, 7));
	cr_assert(bus_access(&bus, 0x3fc, data, 4, false));
	cr_assert(eq(u64, uart.offset, 4));
	cr_assert(eq(u32, uart.len, 4));
	cr_assert(eq(u8, data[3], 0x13));
}

Test(bus, dispatch_mmio_addresses)
{
	struct bus bus;
	struct recorder dev = {0};
	uint8_t data[4] = {1, 2, 3, 4};

	bus_init(&bus);
	cr_assert(eq(int,
		     bus_register(&bus, VIRTIO_MMIO_GPA, 0x200, recorder_access, &dev, "virtio"),
		     0));
	cr_assert(bus_access(&bus, VIRTIO_MMIO_GPA + 0x1fc, data, 4, true));
	cr_assert(eq(u64, dev.offset, 0x1fc));
	cr_assert(eq(u32, dev.len, 4));
	cr_assert(eq(u8[4], dev.data, data));
}

Test(bus, straddling_access_refused)
{
	struct bus bus;
	struct recorder uart = {0}, next = {0};
	uint8_t data[4] = {1, 2, 3, 4};

	bus_init(&bus);
	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, recorder_access, &uart, "uart"), 0));

	/* Read over the end of the range: refused as a whole, all ones. */
	cr_assert(not(bus_access(&bus, 0x3fe, data, 4, false)));
	cr_assert(eq(u32, uart.calls, 0));
	cr_assert(eq(u8[4], data, ((uint8_t[4]){0xff, 0xff, 0xff, 0xff})));

	/* A write over the end: refused, the device sees nothing, the data is left alone. */
	memcpy(data, (uint8_t[4]){1, 2, 3, 4}, 4);
	cr_assert(not(bus_access(&bus, 0x3ff, data, 2, true)));
	cr_assert(eq(u32, uart.calls, 0));
	cr_assert(eq(u8, data[0], 1));

	/* Not even when the rest of the access lands in the next device's range. */
	cr_assert(eq(int, bus_register(&bus, 0x400, 8, recorder_access, &next, "next"), 0));
	cr_assert(not(bus_access(&bus, 0x3fe, data, 4, false)));
	cr_assert(eq(u32, uart.calls, 0));
	cr_assert(eq(u32, next.calls, 0));
	cr_assert(eq(u8, data[2], 0xff));

	/* An access starting just before a range is unclaimed, not the range's. */
	cr_assert(not(bus_access(&bus, 0x3f7, data, 2, false)));
	cr_assert(eq(u32, uart.calls, 0));
}

Test(bus, unclaimed)
{
	struct bus bus;
	struct recorder uart = {0};
	uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	bus_init(&bus);
	cr_assert(not(bus_access(&bus, 0x80, data, 2, false)), "empty bus");
	cr_assert(eq(u8, data[0], 0xff));
	cr_assert(eq(u8, data[1], 0xff));
	cr_assert(eq(u8, data[2], 3), "read wider than its length");

	cr_assert(eq(int, bus_register(&bus, 0x3f8, 8, recorder_access, &uart, "uart"), 0));
	memset(data, 0, sizeof(data));
	cr_assert(not(bus_access(&bus, 0x400, data, 8, false)));
	cr_assert(eq(u8[8], data, ((uint8_t[8]){0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})));
	memset(data, 0x42, sizeof(data));
	cr_assert(not(bus_access(&bus, 0x3f0, data, 1, true)));
	cr_assert(eq(u8, data[0], 0x42), "an unclaimed write changed the data");
	cr_assert(eq(u32, uart.calls, 0));
	cr_assert(not(bus_access(&bus, UINT64_MAX, data, 1, false)));
}
