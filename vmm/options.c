/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-vmm's command line: the usage text, each option's parser and range, and the
 * combinations refused (docs/vmm.md). Every refusal is one line naming the option.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disk.h"
#include "layout.h"
#include "options.h"
#include "virtio/virtio.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandbox-vmm (--kernel PATH | --payload PATH) [options]\n"
		"       sandbox-vmm --restore DIR [--disk ...] [--vsock ...] [--net ...] "
		"[options]\n"
		"       sandbox-vmm --check\n"
		"\n"
		"  --kernel PATH     Linux bzImage or ELF vmlinux with a PVH note\n"
		"  --payload PATH    freestanding ELF started in 64-bit ring 3 "
		"(wire/payload_abi.h)\n"
		"  --initrd PATH     initramfs for the kernel\n"
		"  --cmdline STR     kernel command line (default: \"" DEFAULT_CMDLINE "\")\n"
		"  --cpus N          vCPUs, 1-%u (default 1)\n"
		"  --memory MiB      guest RAM, %llu-%llu (default 256)\n"
		"  --console PATH    write the serial console to PATH instead of stdout\n"
		"  --disk PATH[,ro][,raw][,depth=N]  a virtio-blk disk (up to %u; the first is\n"
		"                    /dev/vda): a layer file (sandbox-disk) or a raw image,\n"
		"                    which is always read-only; ro: read-only; raw: do not\n"
		"                    probe; depth: requests in flight, 1-%u (default %u)\n"
		"  --timeout SEC     stop the guest after SEC seconds (exit status 6)\n"
		"  --lifeline FD     an inherited pipe's read end: when its writers are all\n"
		"                    gone (the creator died), stop the guest (exit status 7)\n"
		"  --api PATH        serve the control socket (wire/api_proto.h) at PATH\n"
		"  --vsock PATH      a virtio-vsock device (guest CID 3): host clients connect\n"
		"                    to PATH and write \"CONNECT <port>\\n\"; the guest's\n"
		"                    connections to host port P go to PATH_P\n"
		"  --net tap=NAME[,netns=PATH][,mac=XX:XX:XX:XX:XX:XX]  a virtio-net NIC on\n"
		"                    the persistent tap NAME (in the network namespace PATH,\n"
		"                    entered only to open it); mac: the guest's (default\n"
		"                    02:53:42:00:00:02)\n"
		"  --restore DIR     resume the VM snapshotted into DIR (the API's SNAPSHOT):\n"
		"                    its RAM and vCPUs come from there; give the same devices\n"
		"                    in the same order (a disk: a new layer over the frozen one)\n"
		"  --restore-memory PATH[,PATH...]  with --restore: map these instead of\n"
		"                    DIR/memory (a fork's frozen RAM, as the API's SNAPSHOT\n"
		"                    reply names it: a file, then the layers over it)\n"
		"  --restore-state-fd FD  with --restore: read the state from this inherited\n"
		"                    fd (the bytes sandboxctl checked, a sealed memfd) instead\n"
		"                    of DIR/state.fdt; DIR then only names the snapshot\n"
		"  --restore-memory-fd FD  with --restore: map this inherited fd (opened\n"
		"                    read-only, checked) instead of DIR/memory\n"
		"  --restore-memory-pager-fd FD  with --restore: the RAM starts empty and a\n"
		"                    pager on this inherited unix socket fills it, each page\n"
		"                    at its first touch (a lazy restore: wire/pager_proto.h)\n"
		"  --jail DIR,uid=N,gid=N[,netns=PATH]  once everything is open, confine the VMM\n"
		"                    to DIR (its new root) in namespaces of its own as uid N,\n"
		"                    gid N, with no capabilities; the paths it is given must lie\n"
		"                    in DIR; netns: join that empty network namespace instead\n"
		"                    of making one (docs/hardening.md)\n"
		"  --check           say which KVM this host has and what can boot on it\n"
		"  -v, --verbose     debug logging\n"
		"\n"
		"exit status: 0 guest shut down, 1 VMM failure, 2 bad arguments or input,\n"
		"3 guest panic, 4 guest triple fault, 5 emulation failure, 6 timeout, 7 signal\n",
		VCPU_MAX, MEM_MIN_MIB, MEM_MAX_MIB, DISKS_MAX, BLK_DEPTH_MAX, BLK_DEPTH_DEFAULT);
}

/* Parse a decimal number in [min, max]; false on anything else. */
static bool parse_uint(const char *s, unsigned long long min, unsigned long long max,
		       unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* Split `arg` (modified) into the path and its ",ro" / ",raw" / ",depth=N" suffixes. */
static bool parse_disk(char *arg, struct disk_option *d)
{
	unsigned long long depth;
	char *comma;

	memset(d, 0, sizeof(*d));
	d->depth = BLK_DEPTH_DEFAULT;
	while ((comma = strrchr(arg, ','))) {
		if (strcmp(comma, ",ro") == 0)
			d->ro = true;
		else if (strcmp(comma, ",raw") == 0)
			d->raw = true;
		else if (strncmp(comma, ",depth=", 7) == 0 &&
			 parse_uint(comma + 7, 1, BLK_DEPTH_MAX, &depth))
			d->depth = (unsigned)depth;
		else
			return false;
		*comma = '\0';
	}
	d->path = arg;
	return *arg != '\0';
}

/* Split `arg` (modified) into tap=NAME and its ",netns=PATH" / ",mac=MAC" fields. */
static bool parse_net(char *arg, struct net_option *n)
{
	static const uint8_t mac_default[6] = NET_MAC_DEFAULT;
	char *save = NULL;

	memset(n, 0, sizeof(*n));
	memcpy(n->mac, mac_default, sizeof(n->mac));
	for (char *f = strtok_r(arg, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		if (strncmp(f, "tap=", 4) == 0 && f[4] && !n->tap)
			n->tap = f + 4;
		else if (strncmp(f, "netns=", 6) == 0 && f[6] && !n->netns)
			n->netns = f + 6;
		else if (strncmp(f, "mac=", 4) == 0 && net_parse_mac(f + 4, n->mac))
			continue;
		else
			return false;
	}
	return n->tap != NULL;
}

/* Returns 0, or an exit status when the command line is unusable. */
int options_parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"kernel", required_argument, NULL, 'k'},
		{"payload", required_argument, NULL, 'p'},
		{"initrd", required_argument, NULL, 'i'},
		{"cmdline", required_argument, NULL, 'c'},
		{"cpus", required_argument, NULL, 'n'},
		{"memory", required_argument, NULL, 'm'},
		{"console", required_argument, NULL, 'o'},
		{"disk", required_argument, NULL, 'd'},
		{"timeout", required_argument, NULL, 't'},
		{"lifeline", required_argument, NULL, 'L'},
		{"api", required_argument, NULL, 'A'},
		{"vsock", required_argument, NULL, 'V'},
		{"net", required_argument, NULL, 'N'},
		{"restore", required_argument, NULL, 'R'},
		{"restore-memory", required_argument, NULL, 'M'},
		{"restore-state-fd", required_argument, NULL, 'S'},
		{"restore-memory-fd", required_argument, NULL, 'F'},
		{"restore-memory-pager-fd", required_argument, NULL, 'P'},
		{"jail", required_argument, NULL, 'J'},
		{"check", no_argument, NULL, 'C'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long long v;
	bool cmdline_given = false, machine_given = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->boot.cmdline = DEFAULT_CMDLINE;
	o->boot.ncpus = 1;
	o->memory_mib = 256;
	o->lifeline_fd = -1;
	o->restore_state_fd = -1;
	o->restore_memory_fd = -1;
	o->restore_pager_fd = -1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
		case 'p':
			if (o->boot.kernel_path) {
				log_error("give one of --kernel and --payload, once");
				return VM_EXIT_BAD_INPUT;
			}
			o->boot.kernel_path = optarg;
			o->boot.payload = c == 'p';
			break;
		case 'i':
			o->boot.initrd_path = optarg;
			break;
		case 'c':
			o->boot.cmdline = optarg;
			cmdline_given = true;
			break;
		case 'n':
			if (!parse_uint(optarg, 1, VCPU_MAX, &v)) {
				log_error("--cpus %s: give a number of vCPUs from 1 to %u", optarg,
					  VCPU_MAX);
				return VM_EXIT_BAD_INPUT;
			}
			o->boot.ncpus = (unsigned)v;
			machine_given = true;
			break;
		case 'm':
			if (!parse_uint(optarg, 0, ULLONG_MAX, &v) || v < MEM_MIN_MIB ||
			    v > MEM_MAX_MIB) {
				log_error("--memory %s: give MiB from %llu to %llu", optarg,
					  MEM_MIN_MIB, MEM_MAX_MIB);
				return VM_EXIT_BAD_INPUT;
			}
			o->memory_mib = v;
			machine_given = true;
			break;
		case 'o':
			o->console_path = optarg;
			break;
		case 'd':
			if (o->ndisks == DISKS_MAX) {
				log_error("--disk %s: at most %u disks", optarg, DISKS_MAX);
				return VM_EXIT_BAD_INPUT;
			}
			if (!parse_disk(optarg, &o->disks[o->ndisks])) {
				log_error("--disk %s: give PATH[,ro][,raw][,depth=N]", optarg);
				return VM_EXIT_BAD_INPUT;
			}
			o->ndisks++;
			break;
		case 't':
			if (!parse_uint(optarg, 1, 7 * 24 * 3600, &v)) {
				log_error("--timeout %s: give seconds, at least 1", optarg);
				return VM_EXIT_BAD_INPUT;
			}
			o->timeout_s = (unsigned)v;
			break;
		case 'L': {
			struct stat st;

			/* Ours from here: not inherited further, and read without blocking. */
			if (!parse_uint(optarg, 3, INT_MAX, &v) || fstat((int)v, &st) < 0 ||
			    !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) ||
			    fcntl((int)v, F_SETFD, FD_CLOEXEC) < 0 ||
			    fcntl((int)v, F_SETFL, fcntl((int)v, F_GETFL) | O_NONBLOCK) < 0) {
				log_error("--lifeline %s: give an open pipe's read end, fd 3 up",
					  optarg);
				return VM_EXIT_BAD_INPUT;
			}
			o->lifeline_fd = (int)v;
			break;
		}
		case 'A':
			o->api_path = optarg;
			break;
		case 'V':
			o->vsock_path = optarg;
			break;
		case 'N':
			if (o->has_net) {
				log_error("--net %s: one --net only", optarg);
				return VM_EXIT_BAD_INPUT;
			}
			/* Parsed in a copy, which it cuts up: the message shows the argument. */
			if (!(o->net_arg = strdup(optarg)) || !parse_net(o->net_arg, &o->net)) {
				log_error("--net %s: give "
					  "tap=NAME[,netns=PATH][,mac=XX:XX:XX:XX:XX:XX] "
					  "(a unicast MAC)",
					  optarg);
				return VM_EXIT_BAD_INPUT;
			}
			o->has_net = true;
			break;
		case 'R':
			o->restore_dir = optarg;
			break;
		case 'M':
			o->restore_memory = optarg;
			break;
		case 'S':
		case 'F': {
			int *fd = c == 'S' ? &o->restore_state_fd : &o->restore_memory_fd;
			struct stat st;

			/* A regular file (the state: a memfd, sealed by sandboxctl; the memory:
			 * opened read-only); ours from here: not inherited further. */
			if (!parse_uint(optarg, 3, INT_MAX, &v) || fstat((int)v, &st) < 0 ||
			    !S_ISREG(st.st_mode) ||
			    (c == 'F' && (fcntl((int)v, F_GETFL) & O_ACCMODE) != O_RDONLY) ||
			    fcntl((int)v, F_SETFD, FD_CLOEXEC) < 0) {
				log_error("%s %s: give an inherited fd (3 up) of a regular file "
					  "(the memory: opened read-only)",
					  c == 'S' ? "--restore-state-fd" : "--restore-memory-fd",
					  optarg);
				return VM_EXIT_BAD_INPUT;
			}
			*fd = (int)v;
			break;
		}
		case 'P': {
			struct stat st;

			/* Ours from here: not inherited further (read blocking, by a thread of
			 * its own: mem_pager.c). */
			if (!parse_uint(optarg, 3, INT_MAX, &v) || fstat((int)v, &st) < 0 ||
			    !S_ISSOCK(st.st_mode) || fcntl((int)v, F_SETFD, FD_CLOEXEC) < 0 ||
			    fcntl((int)v, F_SETFL, fcntl((int)v, F_GETFL) & ~O_NONBLOCK) < 0) {
				log_error("--restore-memory-pager-fd %s: give an inherited unix "
					  "socket's fd, 3 up",
					  optarg);
				return VM_EXIT_BAD_INPUT;
			}
			o->restore_pager_fd = (int)v;
			break;
		}
		case 'J':
			if (!(o->jail_arg = strdup(optarg)) ||
			    jail_parse(o->jail_arg, &o->jail) < 0) {
				log_error(
					"--jail %s: give DIR,uid=N,gid=N[,netns=PATH] (an absolute "
					"directory, ids other than 0, an absolute path)",
					optarg);
				return VM_EXIT_BAD_INPUT;
			}
			break;
		case 'C':
			o->check = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return VM_EXIT_BAD_INPUT;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument: %s", argv[optind]);
		return VM_EXIT_BAD_INPUT;
	}
	if (o->check)
		return 0;
	if ((o->restore_memory || o->restore_state_fd >= 0 || o->restore_memory_fd >= 0 ||
	     o->restore_pager_fd >= 0) &&
	    !o->restore_dir) {
		log_error("--restore-memory, --restore-state-fd, --restore-memory-fd and "
			  "--restore-memory-pager-fd go with --restore");
		return VM_EXIT_BAD_INPUT;
	}
	if ((o->restore_memory != NULL) + (o->restore_memory_fd >= 0) + (o->restore_pager_fd >= 0) >
	    1) {
		log_error("one of --restore-memory, --restore-memory-fd and "
			  "--restore-memory-pager-fd");
		return VM_EXIT_BAD_INPUT;
	}
	if (o->restore_dir) {
		if (o->boot.kernel_path || o->boot.initrd_path || cmdline_given || machine_given) {
			log_error(
				"--restore takes the guest, its RAM and vCPUs from the snapshot: "
				"no --kernel, --payload, --initrd, --cmdline, --cpus or --memory");
			return VM_EXIT_BAD_INPUT;
		}
		return 0;
	}
	if (!o->boot.kernel_path) {
		log_error("nothing to boot: give --kernel PATH or --payload PATH (see --help)");
		return VM_EXIT_BAD_INPUT;
	}
	if (o->boot.payload && (o->boot.initrd_path || cmdline_given)) {
		log_error("--initrd and --cmdline are for Linux kernels, not payloads");
		return VM_EXIT_BAD_INPUT;
	}
	return 0;
}
