/* SPDX-License-Identifier: Apache-2.0 */
/* guest/growfs.c: the superblock of real ext4 images made by mke2fs, and of non-ext4 bytes. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "growfs.h"

/* mke2fs an image of `size` with `opts`, return its superblock. */
static void make_super(const char *opts, const char *size, uint8_t sb[GROWFS_SUPER_LEN])
{
	char path[] = "/tmp/test_growfs.XXXXXX", cmd[512];
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "mke2fs -q -F -t ext4 %s %s %s >/dev/null 2>&1", opts, path,
		 size);
	cr_assert(eq(int, system(cmd), 0), "%s", cmd);
	fd = open(path, O_RDONLY);
	cr_assert(pread(fd, sb, GROWFS_SUPER_LEN, GROWFS_SUPER_OFFSET) == GROWFS_SUPER_LEN);
	close(fd);
	unlink(path);
}

Test(growfs, block_count_and_size_of_real_images)
{
	uint8_t sb[GROWFS_SUPER_LEN];
	uint64_t blocks;
	uint32_t block_len;

	make_super("-b 4096 -O ^64bit", "64M", sb);
	cr_assert(eq(int, growfs_parse_super(sb, &blocks, &block_len), 0));
	cr_assert(eq(u32, block_len, 4096));
	cr_assert(eq(u64, blocks, 64ull * 1024 * 1024 / 4096));
	make_super("-b 1024 -O 64bit", "8M", sb);
	cr_assert(eq(int, growfs_parse_super(sb, &blocks, &block_len), 0));
	cr_assert(eq(u32, block_len, 1024));
	cr_assert(eq(u64, blocks, 8ull * 1024));
}

Test(growfs, not_ext4_is_refused)
{
	uint8_t sb[GROWFS_SUPER_LEN] = {0};
	uint64_t blocks;
	uint32_t block_len;

	cr_assert(eq(int, growfs_parse_super(sb, &blocks, &block_len), -EINVAL));
	make_super("-b 4096", "16M", sb);
	sb[24] = 30; /* a block size of 1 TiB */
	cr_assert(eq(int, growfs_parse_super(sb, &blocks, &block_len), -EINVAL));
}
