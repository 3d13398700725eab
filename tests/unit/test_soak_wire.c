/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/guests/soak_wire.h: the pattern and checksum payload-soak and vsock-soak both compute.
 * The soak is only as good as these: a checksum that pieces change, or that a flipped byte
 * does not, would let it pass with data lost.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>

#include "soak_wire.h"

#define LEN 4099u /* not a multiple of 8: a tail word */

static uint64_t sum_whole(const uint8_t *p, uint64_t len)
{
	struct soak_sum s;

	soak_sum_init(&s);
	soak_sum_update(&s, p, len);
	return soak_sum_final(&s);
}

/* Pieces of every length 1..17 in turn give the sum of the whole. */
Test(soak_wire, sum_does_not_depend_on_pieces)
{
	uint8_t buf[LEN];
	uint64_t want;

	soak_pattern(7, 0, buf, LEN);
	want = sum_whole(buf, LEN);
	for (uint64_t step = 1; step <= 17; step++) {
		struct soak_sum s;

		soak_sum_init(&s);
		for (uint64_t off = 0; off < LEN; off += step)
			soak_sum_update(&s, buf + off, off + step > LEN ? LEN - off : step);
		cr_assert(eq(u64, soak_sum_final(&s), want), "pieces of %llu",
			  (unsigned long long)step);
	}
}

/* Any one flipped bit, a byte dropped, or a zero byte added changes the sum. */
Test(soak_wire, sum_sees_every_change)
{
	uint8_t buf[LEN + 1];
	uint64_t want;

	soak_pattern(9, 0, buf, LEN);
	want = sum_whole(buf, LEN);
	for (unsigned i = 0; i < LEN; i += 13) {
		buf[i] ^= 1u << (i % 8);
		cr_assert(ne(u64, sum_whole(buf, LEN), want), "bit flip at %u", i);
		buf[i] ^= 1u << (i % 8);
	}
	cr_assert(ne(u64, sum_whole(buf, LEN - 1), want), "a byte dropped");
	buf[LEN] = 0;
	cr_assert(ne(u64, sum_whole(buf, LEN + 1), want), "a zero byte added");
	cr_assert(ne(u64, sum_whole(buf, 0), sum_whole(buf, 1)), "empty against one byte");
}

/* The pattern from any offset is the same bytes as from 0; seeds differ. */
Test(soak_wire, pattern_is_one_stream_from_any_offset)
{
	uint8_t whole[LEN], part[LEN], other[LEN];

	soak_pattern(0x1234, 0, whole, LEN);
	for (uint64_t off = 0; off < 40; off++) {
		for (uint64_t len = 0; len < 20 && off + len <= LEN; len++) {
			memset(part, 0xa5, sizeof(part));
			soak_pattern(0x1234, off, part, len);
			cr_assert(eq(int, memcmp(part, whole + off, len), 0), "off %llu len %llu",
				  (unsigned long long)off, (unsigned long long)len);
			cr_assert(eq(u8, part[len], 0xa5), "wrote past len at off %llu",
				  (unsigned long long)off);
		}
	}
	soak_pattern(0x1235, 0, other, LEN);
	cr_assert(ne(int, memcmp(whole, other, LEN), 0), "two seeds, one pattern");
}
