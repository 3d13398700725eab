/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-vmm's command line (options.c): what each option holds once parsed and checked.
 */
#ifndef SANDBOX_VMM_OPTIONS_H
#define SANDBOX_VMM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm.h"

#define DEFAULT_CMDLINE "console=ttyS0 reboot=k panic=-1 quiet"
#define DISKS_MAX	4
/* The command line as built (the user's, then the devices' words); boot_load checks it
 * against what the kernel accepts, so this only needs to be larger than any kernel's limit. */
#define CMDLINE_BUF_LEN (2 * CMDLINE_MAX)

/* --disk PATH[,ro][,raw][,depth=N] */
struct disk_option {
	char *path;
	bool ro;
	bool raw;
	unsigned depth;
};

/* --net tap=NAME[,netns=PATH][,mac=MAC] */
struct net_option {
	char *tap;
	char *netns;
	uint8_t mac[6];
};

struct options {
	struct boot_config boot;
	uint64_t memory_mib;
	const char *console_path;
	const char *api_path;
	const char *vsock_path;
	const char *restore_dir;
	const char *restore_memory;
	int restore_state_fd;  /* --restore-state-fd: the checked state; -1 none */
	int restore_memory_fd; /* --restore-memory-fd: the checked memory file; -1 none */
	int restore_pager_fd;  /* --restore-memory-pager-fd: a lazy restore's pager; -1 none */
	struct disk_option disks[DISKS_MAX];
	unsigned ndisks;
	struct net_option net;
	char *net_arg; /* the copy net points into */
	bool has_net;
	struct jail_config jail;
	char *jail_arg; /* the copy jail.root points into */
	unsigned timeout_s;
	int lifeline_fd; /* --lifeline: EOF on it stops the VM; -1 none */
	bool check;
	bool verbose;
};

/* Parse and check argv into `o`: the defaults, every option's range, the combinations
 * refused. 0, or an exit status after one line saying what is wrong; --help prints the usage
 * and exits 0. */
int options_parse(int argc, char **argv, struct options *o);

#endif
