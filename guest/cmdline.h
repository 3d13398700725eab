/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest kernel command line as sandbox-init reads it: space-separated words, double quotes
 * group spaces as the kernel's own parser does. Only words starting with "sandbox." are ours;
 * everything else belongs to the kernel and is skipped. An unknown sandbox.* word, or a known
 * one with a bad value, is logged as a warning and otherwise ignored.
 *
 * Options understood:
 *   sandbox.panic=0|1   1: after the banner, crash the kernel on purpose (tests of the VMM's
 *                       panic status). Default 0. A bare "sandbox.panic" means 1.
 *   sandbox.reboot=0|1  1 (default): after the banner, sync and reset the VM. 0: stay up and
 *                       wait (reaping children), for the agent.
 *   sandbox.root=DEV    boot from the block device DEV (a path under /dev/, e.g. /dev/vda, at
 *                       most CMDLINE_ROOT_MAX bytes): init mounts it and makes it the root
 *                       before the banner. Default: none, stay on the initramfs.
 *   sandbox.rootfstype=FS  the filesystem of sandbox.root (1 to CMDLINE_FSTYPE_MAX bytes of
 *                       [a-z0-9_]). Default ext4.
 *   sandbox.rw=0|1      1 (default): mount sandbox.root read-write. 0: read-only.
 *   sandbox.net=ADDR/PREFIX,GATEWAY  configure eth0 with the IPv4 address ADDR/PREFIX
 *                       (PREFIX 1 to 30), a default route via GATEWAY (on that subnet, not
 *                       ADDR) and GATEWAY as the resolver. Default: none, eth0 left alone.
 * panic wins over reboot when both are 1. rootfstype and rw mean nothing without root.
 */
#ifndef SANDBOX_GUEST_CMDLINE_H
#define SANDBOX_GUEST_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest command line accepted, not counting the NUL: generous (x86 allows 2048). */
#define CMDLINE_MAX_LEN 4096

/* Longest sandbox.root value, and longest sandbox.rootfstype value, not counting the NUL. */
#define CMDLINE_ROOT_MAX   63
#define CMDLINE_FSTYPE_MAX 15

/* The default of sandbox.rootfstype. */
#define CMDLINE_DEFAULT_FSTYPE "ext4"

/* The options parsed from the command line. */
struct cmdline_options {
	bool panic;		    /* sandbox.panic: crash the kernel after the banner */
	bool reboot;		    /* sandbox.reboot: reset the VM after the banner */
	unsigned int ignored_count; /* sandbox.* words not understood (each one was logged) */

	/* The root device (sandbox.root, "" for none), its filesystem and whether it is rw. */
	char root[CMDLINE_ROOT_MAX + 1];
	char rootfstype[CMDLINE_FSTYPE_MAX + 1];
	bool root_rw;

	/* sandbox.net: eth0's address, prefix and gateway (host byte order); net false: none. */
	bool net;
	uint32_t net_addr;
	unsigned int net_prefix;
	uint32_t net_gateway;
};

/*
 * Fill opts with the defaults: no panic, reboot after the banner, no root device (ext4,
 * read-write if one is given), no network, nothing ignored.
 */
void cmdline_init_options(struct cmdline_options *opts);

/*
 * Parse len bytes of buf (need not be NUL-terminated; parsing stops at a NUL or after len
 * bytes) and update opts with every sandbox.* word found, later words winning. Returns 0, or
 * -E2BIG if len exceeds CMDLINE_MAX_LEN (opts is then left untouched).
 */
int cmdline_parse(const char *buf, size_t len, struct cmdline_options *opts)
	__attribute__((warn_unused_result));

#endif /* SANDBOX_GUEST_CMDLINE_H */
