/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pages a snapshot's last run touched, read from its state (store/snap_touched.c): as the
 * memory's chunks that hold any of them; a state without them, with a bitmap of another size,
 * or that is no device tree, refused with its reason, never read past.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libfdt.h>

#include "snap_remote.h"

#define PAGE 4096u

/* A state file as the VMM writes it (a root with "ram-bytes" and, when bits, "touched-pages"
 * of len bytes) at a path of its own. */
static void write_state(char path[64], const uint8_t *bits, int len)
{
	static uint8_t buf[1u << 20];
	FILE *f;

	snprintf(path, 64, "/tmp/test-snap-touched.XXXXXX");
	cr_assert(mkstemp(path) >= 0);
	cr_assert(fdt_create(buf, sizeof(buf)) == 0 && fdt_finish_reservemap(buf) == 0 &&
		  fdt_begin_node(buf, "") == 0 && fdt_property_u64(buf, "ram-bytes", 1) == 0);
	if (bits)
		cr_assert(fdt_property(buf, "touched-pages", bits, len) == 0);
	cr_assert(fdt_end_node(buf) == 0 && fdt_finish(buf) == 0);
	cr_assert((f = fopen(path, "w")) && fwrite(buf, fdt_totalsize(buf), 1, f) == 1);
	fclose(f);
}

Test(snap_touched, chunks_of_touched_pages)
{
	/* 64 pages of memory in chunks of 16 pages: pages 0, 17 and 63 touched */
	uint8_t bits[8] = {0x01, 0, 0x02, 0, 0, 0, 0, 0x80}, *hot;
	char path[64], err[256];
	uint64_t nhot;

	write_state(path, bits, sizeof(bits));
	cr_assert_eq(snap_touched_chunks(path, 64 * PAGE, 16 * PAGE, &hot, &nhot, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(nhot, 3);
	cr_assert(hot[0] && hot[1] && !hot[2] && hot[3]);
	free(hot);
	unlink(path);
}

Test(snap_touched, none_said)
{
	char path[64], err[256];
	uint64_t nhot = 9;
	uint8_t *hot = (uint8_t *)1;

	write_state(path, NULL, 0);
	cr_assert_eq(snap_touched_chunks(path, 64 * PAGE, 16 * PAGE, &hot, &nhot, err, sizeof(err)),
		     -ENOENT);
	cr_assert(hot == NULL && nhot == 0);
	cr_assert(strstr(err, "no touched-pages"), "%s", err);
	unlink(path);
}

Test(snap_touched, bitmap_of_another_memory_refused)
{
	uint8_t bits[4] = {0xff, 0xff, 0xff, 0xff}, *hot;
	char path[64], err[256];
	uint64_t nhot;

	/* 4 bytes say 32 pages: the memory has 64 (read past them, the bitmap would be) */
	write_state(path, bits, sizeof(bits));
	cr_assert_eq(snap_touched_chunks(path, 64 * PAGE, 16 * PAGE, &hot, &nhot, err, sizeof(err)),
		     -EBADMSG);
	cr_assert(hot == NULL);
	cr_assert(strstr(err, "touched-pages has 4 bytes for 64 pages"), "%s", err);
	unlink(path);
}

Test(snap_touched, not_a_state_refused)
{
	char path[] = "/tmp/test-snap-touched.XXXXXX", err[256];
	uint8_t junk[256], *hot;
	uint64_t nhot;
	int fd = mkstemp(path);

	memset(junk, 0xd0, sizeof(junk)); /* the FDT magic's first byte, and garbage */
	cr_assert(fd >= 0 && write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	close(fd);
	cr_assert_eq(snap_touched_chunks(path, 64 * PAGE, 16 * PAGE, &hot, &nhot, err, sizeof(err)),
		     -EBADMSG);
	cr_assert(strstr(err, "not a device tree"), "%s", err);
	/* a chunk that is not whole pages: refused before anything is read */
	cr_assert_eq(snap_touched_chunks(path, 64 * PAGE, 1000, &hot, &nhot, err, sizeof(err)),
		     -EINVAL);
	unlink(path);
}
