/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Online growth of the root ext4 (growfs.h). The superblock is read from the device itself,
 * not trusted further than its magic and block size; the kernel's EXT4_IOC_RESIZE_FS does the
 * rest (and refuses what it cannot do).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/fs.h>

#include "growfs.h"

/* From the kernel's fs/ext4/ext4.h; not in the UAPI headers. */
#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif
#define EXT4_SUPER_MAGIC	    0xef53
#define EXT4_FEATURE_INCOMPAT_64BIT 0x80

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int growfs_parse_super(const uint8_t sb[GROWFS_SUPER_LEN], uint64_t *blocks, uint32_t *block_len)
{
	uint32_t log = le32_at(sb + 24), incompat = le32_at(sb + 0x60);

	if ((sb[0x38] | sb[0x39] << 8) != EXT4_SUPER_MAGIC || log > 6) /* 1 KiB .. 64 KiB */
		return -EINVAL;
	*block_len = 1024u << log;
	*blocks = le32_at(sb + 4);
	if (incompat & EXT4_FEATURE_INCOMPAT_64BIT)
		*blocks |= (uint64_t)le32_at(sb + 0x150) << 32;
	return 0;
}

int growfs_ext4(const char *dev, const char *mountpoint, int *grew)
{
	uint8_t sb[GROWFS_SUPER_LEN];
	uint64_t dev_len, blocks, want;
	uint32_t block_len;
	int fd, err;

	*grew = 0;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKGETSIZE64, &dev_len) < 0)
		err = -errno;
	else if (pread(fd, sb, sizeof(sb), GROWFS_SUPER_OFFSET) != (ssize_t)sizeof(sb))
		err = -EIO;
	else
		err = growfs_parse_super(sb, &blocks, &block_len);
	close(fd);
	if (err < 0)
		return err;
	want = dev_len / block_len;
	if (want <= blocks)
		return 0;
	fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = ioctl(fd, EXT4_IOC_RESIZE_FS, &want) < 0 ? -errno : 0;
	close(fd);
	*grew = err == 0;
	return err;
}
