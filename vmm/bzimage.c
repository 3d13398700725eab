/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bzImage parsing (Documentation/x86/boot.rst). The file is untrusted: every field read is
 * inside the buffer, and every size is checked against the file before it is used.
 */
#include <errno.h>
#include <string.h>

#include <asm/bootparam.h>

#include "vmm.h"

#define BZ_HDR_OFFSET  0x1f1
#define BZ_MIN_VERSION 0x020c /* 2.12: xloadflags, the 64-bit entry point */

int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage *bz)
{
	struct setup_header hdr;
	size_t setup_sects;

	/* The header runs from 0x1f1 to the end of struct setup_header (protocol 2.15). */
	if (len < BZ_HDR_OFFSET + sizeof(hdr))
		return -ENOEXEC;
	memcpy(&hdr, buf + BZ_HDR_OFFSET, sizeof(hdr));
	if (hdr.boot_flag != 0xaa55 || memcmp(&hdr.header, "HdrS", 4) != 0)
		return -ENOEXEC;
	if (hdr.version < BZ_MIN_VERSION)
		return -EPROTO;
	if (!(hdr.xloadflags & XLF_KERNEL_64) || !(hdr.loadflags & LOADED_HIGH))
		return -EPROTO;
	setup_sects = hdr.setup_sects ? hdr.setup_sects : 4;
	memset(bz, 0, sizeof(*bz));
	bz->setup_len = (setup_sects + 1) * 512;
	if (bz->setup_len >= len)
		return -ENOEXEC;
	/* syssize counts 16-byte paragraphs of the protected-mode kernel: a truncated file has
	 * fewer bytes than its header promises. */
	if ((uint64_t)hdr.syssize * 16 > len - bz->setup_len)
		return -ENODATA;
	bz->setup = buf;
	bz->kernel = buf + bz->setup_len;
	bz->kernel_len = len - bz->setup_len;
	bz->version = hdr.version;
	bz->cmdline_max = hdr.cmdline_size;
	bz->initrd_addr_max = hdr.initrd_addr_max;
	bz->init_size = hdr.init_size;
	bz->pref_address = hdr.pref_address;
	return 0;
}
