/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Growing the root file system to its disk: a sandbox created with a disk larger than its
 * image (sandboxctl create --disk-size) gets an ext4 that fills it, online, at boot.
 */
#ifndef SANDBOX_GUEST_GROWFS_H
#define SANDBOX_GUEST_GROWFS_H

#include <stdint.h>

#define GROWFS_SUPER_OFFSET 1024 /* the ext2/3/4 superblock, 1024 bytes at this offset */
#define GROWFS_SUPER_LEN    1024

/* Read an ext2/3/4 superblock: its block count and block size. -EINVAL when it is not one
 * (bad magic, a block size out of range). */
int growfs_parse_super(const uint8_t sb[GROWFS_SUPER_LEN], uint64_t *blocks, uint32_t *block_len)
	__attribute__((warn_unused_result));

/* Grow the ext4 on block device `dev`, mounted read-write at `mountpoint`, to the device's
 * size (EXT4_IOC_RESIZE_FS). 0 when it grew or had nothing to do (*grew says which), -errno
 * otherwise; the file system is left as it was on failure. */
int growfs_ext4(const char *dev, const char *mountpoint, int *grew)
	__attribute__((warn_unused_result));

#endif
