/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-vmm internal interfaces. One header for the component: every function another file
 * calls is declared here with a comment saying what it does. Functions return 0 or -errno and
 * hand results back through out parameters unless the comment says otherwise.
 */
#ifndef SANDBOX_VMM_H
#define SANDBOX_VMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/kvm.h>

#include "evloop.h"
#include "layout.h"

#define __must_check __attribute__((warn_unused_result))

typedef uint64_t gpa_t;

/* ---- log.c: one small logging module; every line is prefixed with the VM's id. ---- */

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the prefix ("sandbox-vmm" by default) and the least level printed. */
void log_init(const char *id, enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
/* True at most `burst` times per second per call site's limiter: for guest-triggered logs. */
struct log_ratelimit {
	uint64_t window_ns;
	unsigned count;
};
bool log_ratelimit_ok(struct log_ratelimit *rl, unsigned burst);
/* Whether messages of `level` are printed (to skip work done only to log at it). */
bool log_enabled(enum log_level level);
/* CLOCK_MONOTONIC in nanoseconds: uptimes, deadlines, rate windows. */
uint64_t vmm_now_ns(void);

/* ---- jail.c: the VMM's confinement once it holds its resources (docs/hardening.md). ---- */

/* The jailed VMM's limits: fds (devices, vsock connections, api clients, with room), and
 * processes of its uid (its vCPU threads and io_uring's workers; seccomp forbids fork). */
#define JAIL_NOFILE 4096
#define JAIL_NPROC  256

/* Where a jailed VMM keeps KVM's fds and the tap's (vm_place_fds), at fixed numbers so that
 * its seccomp filters, compiled at build time, can name them: at and above JAIL_NOFILE, where
 * no fd it opens or receives once jailed can land. */
#define JAIL_FD_KVM   JAIL_NOFILE
#define JAIL_FD_VM    (JAIL_NOFILE + 1)
#define JAIL_FD_TAP   (JAIL_NOFILE + 2)
/* vCPU i's is JAIL_FD_VCPU0 + i: a block aligned to its size, VCPU_MAX (a power of 2), so that
 * "any vCPU" is one masked comparison of all 64 bits of an fd (the kernel takes 32 of them). */
#define JAIL_FD_VCPU0 (JAIL_NOFILE + VCPU_MAX)
#define JAIL_FD_END   (JAIL_FD_VCPU0 + VCPU_MAX)

struct jail_config {
	const char *root; /* the sandbox's directory: the VMM's / from now on */
	uid_t uid;	  /* the sandbox's own, never 0 */
	gid_t gid;
	uint64_t fsize;	 /* RLIMIT_FSIZE: the largest file it writes */
	uint64_t nofile; /* RLIMIT_NOFILE */
	uint64_t nproc;	 /* RLIMIT_NPROC: its threads and io_uring's workers */
	/* An empty network namespace to join (netns=PATH, sandboxctl's shared one), or NULL:
	 * the VMM makes its own (docs/hardening.md). */
	const char *netns;
};

/* Parse --jail DIR,uid=N,gid=N[,netns=PATH] (`arg` is cut up; j->root and j->netns point
 * into it) into `j`'s root, ids and network namespace; the limits are the caller's. 0 or
 * -EINVAL. */
int jail_parse(char *arg, struct jail_config *j);
/* Unless this process is already PID 1 of a pid namespace (as its launcher made it), make
 * one: fork into it, and in the parent only forward SIGTERM, SIGINT and SIGHUP to the child
 * and exit with its status (as `j`'s uid, filtered). Returns 0 in the child, -errno. Call it
 * first, while nothing is open. */
int jail_pid_namespace(const struct jail_config *j) __must_check;
/* Is `dir` usable as a jail (an absolute, canonical directory other than /)? 0, or -errno
 * with `msg` saying why. */
int jail_check_root(const char *dir, char *msg, size_t len);
/* Confine this (single-threaded) process as `j` says. 0, or -errno with `msg` naming the step
 * that failed: the caller must then exit, half-confined. */
int jail_enter(const struct jail_config *j, char *msg, size_t len) __must_check;
/* Whether jail_enter succeeded, and the host path of the jail's root ("" if not). */
bool jail_active(void);
const char *jail_dir(void);
/* Move *fd to `target` (a JAIL_FD_* number, which must be free), raising RLIMIT_NOFILE to
 * JAIL_FD_END for it (the jail lowers it again). 0 or -errno; *fd is unchanged on failure. */
int jail_place_fd(int *fd, int target) __must_check;
/* `path` (a host path) as seen from inside the jail: itself when there is no jail, NULL
 * when it lies outside the jail's root. */
const char *jail_path(const char *path);
/* `path` relative to `root` (with its leading '/'), or NULL when it is not under `root`. */
const char *jail_path_in(const char *root, const char *path);

/* ---- seccomp.c: one filter per thread kind, installed on the calling thread. ---- */

struct vm;
struct vcpu;

/* The base filter (first, while the VMM has one thread; a VMM that restores loads the restore
 * filter before it, to apply the snapshot's state under), then a vCPU thread's (as it starts)
 * and the I/O thread's (before the devices serve guest input), each narrowing it. The
 * filters are compiled at build time (vmm/filters) and name the VM's fds by their fixed
 * numbers: -EBADFD when vm_place_fds has not put them there, or (the base and the restore
 * filter) when RLIMIT_NOFILE is above JAIL_FD_KVM or another fd sits among those numbers.
 * 0 or -errno. */
int seccomp_install_restore(const struct vm *vm) __must_check;
int seccomp_install_base(const struct vm *vm) __must_check;
int seccomp_install_io(const struct vm *vm) __must_check;
int seccomp_install_vcpu(const struct vm *vm, const struct vcpu *vcpu) __must_check;
/* The kill-or-log choice (SANDBOX_SECCOMP), made once, before any thread exists. */
void seccomp_decide_action(void);
/* Limit a ring made with IORING_SETUP_R_DISABLED to the operations virtio-blk submits, and
 * enable it (a ring made without the flag is left as it is). 0 or -errno. */
struct io_uring;
int uring_restrict(struct io_uring *ring) __must_check;

/* ---- memory.c: guest RAM in one memfd, split around the 3-4 GiB MMIO hole. ---- */

#define MEM_MAX_REGIONS 2
#define MEM_DELTAS_MAX	7 /* a chain of 8 memory files at most, then one is compacted */

struct mem_region {
	gpa_t gpa;
	uint64_t len;
	uint8_t *hva;
	uint64_t fd_offset; /* where the region starts in the RAM file */
};

struct guest_mem {
	struct mem_region regions[MEM_MAX_REGIONS];
	unsigned nregions;
	uint64_t ram_len;  /* total RAM bytes */
	int fd;		   /* the memfd, -1 for a buffer made by a test */
	uint8_t *base;	   /* host mapping of the whole RAM file */
	bool private_file; /* fd is a snapshot's memory file, mapped privately */
	/* Over fd, layers of the pages that changed between two freezes (mem_snap.c): each a
	 * sparse RAM-sized memfd whose data extents are mapped privately over the lower ones. */
	int deltas[MEM_DELTAS_MAX];
	unsigned ndeltas;
	/* A lazy restore's (mem_pager.c): the pager's socket and the VMM's userfaultfd, -1
	 * without; filling (read with __atomic) while pages are still missing. */
	int pager_fd, uffd;
	bool filling;
	/* A memfd's RAM whose mappings were dropped (mem_touched_mark): what is mapped since is
	 * what the guest touched since. */
	bool touched_marked;
};

/* Lay out `ram_len` bytes of RAM mapped at `base` (no allocation): below the hole, then above
 * 4 GiB. Used by mem_create and by unit tests with a malloc'ed buffer. */
void mem_layout(struct guest_mem *mem, uint8_t *base, uint64_t ram_len);
/* Create RAM as a memfd of `ram_len` bytes mapped shared; pages are allocated on first touch. */
int mem_create(struct guest_mem *mem, uint64_t ram_len) __must_check;
/* Map `len` bytes of `fd` (MAP_SHARED or MAP_PRIVATE) at a 2 MiB-aligned address. */
void *mem_map_aligned(int fd, uint64_t len, int share);

/* ---- mem_snap.c: guest RAM in snapshots and forks ---- */

/* Map a snapshot's memory privately (copy on write): `paths[0]` (or `first_fd` when >= 0,
 * taken; paths[0] then only names it), a file of exactly `ram_len`
 * bytes, and over it the data extents of each later one (a fork's delta layers). Pages load
 * lazily from the page cache, shared with every VM restored from the same files. -EBADMSG
 * (with a log line) for a file of another size. */
int mem_open_files(struct guest_mem *mem, const char *const *paths, unsigned npaths, int first_fd,
		   uint64_t ram_len) __must_check;
/* Open /proc/self/pagemap for the snapshot code, once (the jail has no /proc): 0 or -errno. */
int mem_pagemap_open(void);
/* The pages the guest touched since its RAM was mapped from memory files (a restore, a
 * freeze): a bit a page, *len bytes of *bits (the caller frees), for the snapshot's state
 * ("touched-pages"). -ENOTSUP for RAM that is no private mapping of files. */
int mem_touched_pages(const struct guest_mem *mem, uint8_t **bits, size_t *len);
/* From now on, mem_touched_pages counts what the guest touches from here: a memfd's RAM (not a
 * private mapping, whose dropped pages would lose what the guest wrote) has its mappings
 * dropped (MADV_DONTNEED: the memfd keeps every page; the guest's next touch maps it again).
 * 0; a private mapping counts from its restore: 0, nothing done; -EAGAIN while a pager fills
 * it. */
int mem_touched_mark(struct guest_mem *mem);
/* mem_touched_mark's drop itself, for a memfd with no holes (the caller knows: the pager's
 * watcher at PAGER_DONE, while filling still keeps snapshots away). */
int mem_touched_drop(struct guest_mem *mem);
/* Freeze RAM for a fork: from now on the guest writes to private copies of its pages, and
 * the VM's memory files (mem->fd, then mem->deltas, open until mem_destroy) hold RAM as it
 * was. RAM stays at the same host addresses. The first freeze of a fresh VM's memfd copies
 * nothing; a later one (or one of a restored VM) copies the pages written since into a new
 * delta layer, found in /proc/self/pagemap: a fork costs what changed. Past MEM_DELTAS_MAX
 * layers the whole RAM is copied into one new memfd instead. */
int mem_freeze(struct guest_mem *mem) __must_check;
/* Map `view` (a copy of a frozen VM's guest_mem whose base is a reserved area of ram_len
 * bytes of our own) over the same memory files: what a fork froze, for writing it out. */
int mem_map_frozen_view(struct guest_mem *view) __must_check;
/* pwrite all of `buf` at `off`, in pieces of at most 8 MiB, retrying EINTR and short writes. */
int mem_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off) __must_check;
/* The memory files as /proc/<pid>/fd/<n>[,...] for --restore-memory. */
int mem_frozen_paths(const struct guest_mem *mem, char *out, size_t len) __must_check;
/* Write RAM into `fd` (made RAM-sized), sparse: only pages holding something but zeros;
 * *written gets their bytes; `sha256` (may be NULL) the page digest of what was written
 * (wire/api_proto.h, api_snapshot_result), which needs mem_digest_init first. No fsync. */
int mem_copy_to_fd(const struct guest_mem *mem, int fd, uint64_t *written,
		   uint8_t sha256[32]) __must_check;
/* Fetch SHA-256 for the page digest, before the jail: 0, or -ENOSYS (then snapshots that
 * write memory fail saying so). */
int mem_digest_init(void);
void mem_destroy(struct guest_mem *mem);

/* ---- mem_pager.c: a lazy restore's RAM, filled by a pager (wire/pager_proto.h) ---- */

/* Register mem (fresh and empty: mem_create) with a userfaultfd, send it to the pager on
 * sock (kept, as mem->pager_fd) and start the thread that waits for the pager's word (the
 * userfaultfd let go) or its end (the VMM ends, exit status 1). 0 or -errno, logged. */
int mem_pager_attach(struct guest_mem *mem, int sock) __must_check;
/* Close the pager's socket and the userfaultfd (mem_destroy does). */
void mem_pager_close(struct guest_mem *mem);
/* The disks' fetch function (disk.h, disk_set_fetch) of a lazy restore: arg is the VM's
 * guest_mem; [offset, + len) of the layer's file asked of the pager, waited for. */
int mem_pager_fetch(void *arg, const uint8_t layer_id[16], uint64_t offset, uint64_t len);
/* Host address of [gpa, gpa+len) if the whole range is RAM in one region, else NULL.
 * Every guest address goes through here: overflow and bounds are checked. */
void *mem_gpa_to_hva(const struct guest_mem *mem, gpa_t gpa, uint64_t len);
/* End of RAM below the hole (the top of "low" RAM). */
gpa_t mem_low_end(const struct guest_mem *mem);
/* End of the highest RAM byte + 1 (above 4 GiB when the guest has that much). */
gpa_t mem_top(const struct guest_mem *mem);
/* Copy `len` bytes to guest RAM at `gpa`; -EFAULT if the range is not RAM. */
int mem_write(const struct guest_mem *mem, gpa_t gpa, const void *src, uint64_t len) __must_check;

/* ---- snap_fdt.c: the snapshot's state file, a flattened device tree (docs/snapshots.md) ---- */

#define SNAP_STATE_MAX (64u << 20) /* the largest state file written or read */

/* Builds a tree with libfdt's sequential-write calls. The first failure is kept in `err` and
 * every later call does nothing, so a writer checks once, at snapw_finish. */
struct snap_writer {
	void *buf;
	size_t cap;
	int err;
};
int snapw_init(struct snap_writer *w) __must_check;
void snapw_free(struct snap_writer *w);
void snapw_begin(struct snap_writer *w, const char *name);
/* A node named "name@index". */
void snapw_begin_index(struct snap_writer *w, const char *name, unsigned index);
void snapw_end(struct snap_writer *w);
void snapw_prop(struct snap_writer *w, const char *name, const void *val, size_t len);
void snapw_u32(struct snap_writer *w, const char *name, uint32_t v); /* little-endian */
void snapw_u64(struct snap_writer *w, const char *name, uint64_t v);
/* Close the tree; *buf (owned by the writer) holds *len bytes. */
int snapw_finish(struct snap_writer *w, const void **buf, size_t *len) __must_check;

/* Reads a tree that is hostile input. Every getter checks the property's exact length; the
 * first failure's message is kept in `msg`, naming the node and property. */
struct snap_reader {
	const void *fdt;
	char msg[256];
};
/* Check the header, that the tree is exactly `len` bytes, and its whole structure. */
int snapr_open(struct snap_reader *r, const void *buf, size_t len) __must_check;
/* Record a failure (the first one's message is kept); returns `err`. */
int snapr_fail(struct snap_reader *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The offset of `parent`'s subnode `name` (or "name@index"), or -ENOENT. */
int snapr_node(struct snap_reader *r, int parent, const char *name);
int snapr_node_index(struct snap_reader *r, int parent, const char *name, unsigned index);
bool snapr_has(struct snap_reader *r, int node, const char *name);
/* A property of any length (NULL when absent); the pointer is into the tree. */
const void *snapr_var(struct snap_reader *r, int node, const char *name, size_t *len);
/* A property of exactly `len` bytes, copied to `out`. */
int snapr_get(struct snap_reader *r, int node, const char *name, void *out,
	      size_t len) __must_check;
int snapr_u32(struct snap_reader *r, int node, const char *name, uint32_t *v) __must_check;
int snapr_u64(struct snap_reader *r, int node, const char *name, uint64_t *v) __must_check;
/* A u32 no larger than `max`. */
int snapr_u32_max(struct snap_reader *r, int node, const char *name, uint32_t max,
		  uint32_t *v) __must_check;

/* ---- x86 boot structures (e820.c, pagetable.c, gdt.c, mptable.c, bootparams.c) ---- */

struct e820_entry_host {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* E820_RAM_TYPE, E820_RESERVED_TYPE */
};
#define E820_RAM_TYPE	   1
#define E820_RESERVED_TYPE 2
#define E820_MAX	   8

/* The guest's memory map: base memory, the EBDA/MP table, RAM from 1 MiB, RAM above 4 GiB.
 * Returns the number of entries written to `out` (at most E820_MAX). */
unsigned e820_build(const struct guest_mem *mem, struct e820_entry_host *out);

/* Identity-map [0, *map_end) with 2 MiB pages at PAGETABLE_GPA, covering at least 4 GiB and all
 * of RAM. `user` sets the U/S bit on every level (payload guests run at CPL 3). */
int pagetable_build(const struct guest_mem *mem, bool user, gpa_t *map_end) __must_check;

/* The GDT every vCPU loads (selectors below), written at GDT_GPA. */
#define GDT_SEL_CODE32	0x08
#define GDT_SEL_CODE64	0x10 /* __BOOT_CS of the Linux boot protocol */
#define GDT_SEL_DATA	0x18 /* __BOOT_DS */
#define GDT_SEL_UDATA	0x2b /* ring 3 data, the payload ABI's PAYLOAD_SEL_DATA */
#define GDT_SEL_UCODE64 0x33
#define GDT_SEL_TSS	0x38 /* a long-mode TSS descriptor takes two slots, 7 and 8 */
#define GDT_ENTRIES	9
/* Fill `gdt` with the descriptors. */
void gdt_build(uint64_t gdt[GDT_ENTRIES]);
/* The kvm_segment KVM wants for selector `sel` of `gdt` (the same bits, unpacked). */
void gdt_to_kvm_segment(const uint64_t gdt[GDT_ENTRIES], uint16_t sel, struct kvm_segment *seg);
int gdt_write(const struct guest_mem *mem) __must_check;

/* Write an Intel MP table (floating pointer + config table: one processor entry per vCPU with
 * APIC id = index, an ISA bus, the IOAPIC, its interrupt routing) at MPTABLE_GPA. */
int mptable_write(const struct guest_mem *mem, unsigned ncpus) __must_check;
/* Sum of `len` bytes, the MP spec's checksum (the table is valid when the sum is 0). */
uint8_t mptable_checksum(const void *buf, size_t len);

/* ---- bzimage.c / elf.c: parsing kernel files (pure, on bytes in host memory) ---- */

struct bzimage {
	const uint8_t *setup;  /* the setup header is at setup + 0x1f1 */
	size_t setup_len;      /* (setup_sects + 1) * 512 */
	const uint8_t *kernel; /* the protected-mode kernel */
	size_t kernel_len;
	uint16_t version;     /* boot protocol version */
	uint32_t cmdline_max; /* longest command line, without the NUL */
	uint32_t initrd_addr_max;
	uint32_t init_size; /* memory the kernel needs from its load address */
	uint64_t pref_address;
};
/* Parse and check a bzImage of boot protocol >= 2.12 with a 64-bit entry point. */
int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage *bz) __must_check;

#define ELF_MAX_SEGMENTS 16
struct elf_segment {
	uint64_t offset; /* in the file */
	uint64_t filesz;
	uint64_t memsz;
	gpa_t paddr;
};
struct elf_image {
	uint64_t entry;	    /* e_entry */
	uint64_t pvh_entry; /* XEN_ELFNOTE_PHYS32_ENTRY, 0 if the note is absent */
	unsigned nsegments;
	struct elf_segment segments[ELF_MAX_SEGMENTS];
};
/* Parse and check an ELF64 x86-64 executable: header, program headers and notes in bounds,
 * PT_LOAD sizes sane. Segments are not checked against guest RAM here (see elf_load). */
int elf_parse(const uint8_t *buf, size_t len, struct elf_image *elf) __must_check;
/* Copy the segments into guest RAM (zero-filling memsz past filesz). Every segment must lie in
 * RAM at or above `min_gpa` and end at or below `max_gpa`. */
int elf_load(const struct guest_mem *mem, const uint8_t *buf, const struct elf_image *elf,
	     gpa_t min_gpa, gpa_t max_gpa) __must_check;

/* ---- cpuid.c ---- */

/* Announce the TSC-deadline timer, which KVM's in-kernel LAPIC emulates but
 * KVM_GET_SUPPORTED_CPUID does not report (KVM_CAP_TSC_DEADLINE_TIMER says it is there).
 * Without it Linux calibrates the LAPIC timer against the PIT, which failed under nesting
 * ("APIC timer disabled due to verification failure") and cost seconds of boot. */
void cpuid_set_tsc_deadline(struct kvm_cpuid_entry2 *entries, unsigned nent);
/* Append the VMM's own leaves (payload_abi.h, PAYLOAD_CPUID_SIG_LEAF), with the VM's `nonce`,
 * to the `*nent` entries of an array of `cap`, replacing any already there. -ENOSPC if they do
 * not fit. */
int cpuid_add_vmm_leaves(struct kvm_cpuid_entry2 *entries, unsigned *nent, unsigned cap,
			 uint32_t nonce) __must_check;
/* True when leaf 0's vendor string is AMD's (or Hygon's, which shares AMD's leaves). */
bool cpuid_vendor_amd(const struct kvm_cpuid_entry2 *entries, unsigned nent);
/* Adapt the host's supported CPUID entries for vCPU `index` of `ncpus`: APIC ids, topology
 * leaves 1/4/0xb/0x1f and AMD's 0x80000008/0x8000001d/0x8000001e, the VMM's info leaf, the
 * hypervisor bit, no PMU. Changes `entries` in place. */
void cpuid_filter(struct kvm_cpuid_entry2 *entries, unsigned nent, unsigned index, unsigned ncpus);

/* ---- cpuid_probe.c ---- */

enum cpuid_trap { CPUID_TRAPPED, CPUID_NATIVE, CPUID_UNKNOWN };
/* Does a guest's ring-3 `cpuid` reach the VMM's table on this host? Runs a one-vCPU probe VM
 * (a few instructions, ~1 ms) that executes `cpuid` on PAYLOAD_CPUID_SIG_LEAF and reports the
 * signature through an MMIO write. CPUID_UNKNOWN (with a log line saying why) when the probe
 * could not run or ended some other way. */
enum cpuid_trap cpuid_probe_trap(void);
const char *cpuid_trap_verdict(enum cpuid_trap t);

/* ---- boot.c: putting a guest into RAM and describing its first instruction ---- */

enum boot_mode {
	BOOT_LINUX64, /* bzImage: 64-bit boot protocol, rsi = boot_params */
	BOOT_PVH,     /* ELF vmlinux: 32-bit protected mode, ebx = hvm_start_info */
	BOOT_PAYLOAD, /* freestanding ELF: 64-bit ring 3, see payload_abi.h */
};

struct boot_config {
	const char *kernel_path; /* --kernel or --payload */
	bool payload;
	const char *initrd_path; /* NULL for none */
	const char *cmdline;	 /* "" for none */
	unsigned ncpus;
	uint32_t cpuid_nonce; /* the VM's (struct vm), told to payloads in payload_info */
};

/* What every vCPU needs to start. */
struct boot_entry {
	enum boot_mode mode;
	gpa_t rip;
	gpa_t map_end;	  /* the identity map covers [0, map_end) */
	gpa_t arg_gpa;	  /* boot_params, hvm_start_info or payload_info */
	gpa_t stacks_gpa; /* payload only */
};

/* Load the kernel or payload, initrd and command line into RAM and write every boot
 * structure (e820, boot_params or start_info or payload_info, page tables, GDT, MP table).
 * Errors are reported through log_error with the file name and reason. */
int boot_load(const struct guest_mem *mem, const struct boot_config *cfg,
	      struct boot_entry *entry) __must_check;
/* Pure part of boot_load for bzImage: fill boot_params from the parsed header. The header's
 * cmdline_size stays the kernel's (the longest command line it accepts). */
struct boot_params;
void bootparams_build(struct boot_params *bp, const struct bzimage *bz, const struct guest_mem *mem,
		      gpa_t cmdline_gpa, gpa_t initrd_gpa, uint64_t initrd_len);

/* ---- kvm.c: the host's KVM flavour (kvm.h, which sandboxctl shares) ---- */
#include "kvm.h"

/* ---- bus.c: port I/O and MMIO dispatch ---- */

struct bus_device;
/* A device's access handler: `write` tells the direction, `data` holds `len` bytes. */
typedef void (*bus_access_fn)(void *opaque, uint64_t offset, uint8_t *data, uint32_t len,
			      bool write);

struct bus_range {
	uint64_t base;
	uint64_t len;
	bus_access_fn access;
	void *opaque;
	const char *name;
};

#define BUS_MAX_RANGES 16
struct bus {
	struct bus_range ranges[BUS_MAX_RANGES];
	unsigned nranges;
};
/* Register [base, base+len); overlapping ranges are refused. */
int bus_register(struct bus *bus, uint64_t base, uint64_t len, bus_access_fn access, void *opaque,
		 const char *name) __must_check;
/* Drop every range of `opaque` (a device whose making failed after it registered some). */
void bus_unregister(struct bus *bus, const void *opaque);
/* Dispatch one access; false when nothing claims the address (reads then return all ones). */
bool bus_access(const struct bus *bus, uint64_t addr, uint8_t *data, uint32_t len, bool write);

/* ---- vm.c, vcpu.c: the running machine ---- */

/* How the VMM ends; also its process exit status (documented in docs/vmm.md). */
enum vm_exit_status {
	VM_EXIT_SHUTDOWN = 0,  /* the guest reset or powered off */
	VM_EXIT_VMM_ERROR = 1, /* host-side failure */
	VM_EXIT_BAD_INPUT = 2, /* bad arguments, kernel, initrd, ... */
	VM_EXIT_PANIC = 3,     /* the guest kernel panicked */
	VM_EXIT_TRIPLE_FAULT = 4,
	VM_EXIT_EMULATION = 5, /* KVM could not run or emulate guest code */
	VM_EXIT_TIMEOUT = 6,
	VM_EXIT_SIGNAL = 7, /* stopped by SIGINT/SIGTERM */
};

struct serial;
struct i8042;
struct vm;
struct virtio_dev;

struct vcpu {
	struct vm *vm;
	unsigned index;
	int fd;
	struct kvm_run *run;
	size_t run_len;
	pthread_t thread;
	bool started;
	struct log_ratelimit unhandled_rl;
	uint64_t exits;	     /* KVM_RUN returns, for -v statistics */
	uint64_t io_exits;   /* of which port I/O */
	uint64_t mmio_exits; /* of which MMIO */
};

/* A device's teardown, registered by the code that made it (vm_device_add): vm_destroy calls
 * each, the last added first, knowing nothing of what the device is (the machine does not call
 * into its devices' transports). */
struct vm_device {
	void *dev;
	void (*destroy)(void *dev);
};
/* The serial port, the i8042 and VIRTIO_MMIO_MAX virtio-mmio devices, with room to spare. */
#define VM_DEVICES_MAX 16

struct vm {
	int kvm_fd;
	int vm_fd;
	struct guest_mem mem;
	struct bus pio;
	struct bus mmio;
	struct serial *serial;
	struct i8042 *i8042;
	struct virtio_dev *virtio[8]; /* virtio-mmio devices, in window order */
	unsigned nvirtio;
	struct vm_device devices[VM_DEVICES_MAX]; /* teardowns, in the order added */
	unsigned ndevices;
	unsigned ncpus;
	struct vcpu vcpus[VCPU_MAX];
	struct kvm_cpuid2 *cpuid; /* the host's supported CPUID, filtered per vCPU at setup */
	uint32_t cpuid_nonce;	  /* random, in the VMM's info leaf (payload_abi.h) */
	struct evloop loop;	  /* the I/O thread's; devices add their fds to it */
	int stop_fd;		  /* eventfd: a vCPU asked the VM to stop */
	int tap_fd;		  /* the NIC's tap (-1: none): its ioctls are allowed */
	bool seccomp;		  /* jailed (from creation on): each thread installs its filter */
	/* Jailed: the vCPU threads start before the base filter and wait here (under lock)
	 * until it is on every thread and the devices are resumed (vcpu_release_all). */
	bool vcpus_released;
	pthread_cond_t release_cond;
	atomic_bool stopping;
	atomic_int exit_status; /* first stop request wins; -1 while running */
	char exit_reason[160];
	pthread_mutex_t lock;	    /* protects exit_reason, nparked, vcpus_released */
	atomic_bool guest_panicked; /* the console showed a kernel panic */
	/* Pause (vcpu_pause_all): vCPUs park on pause_cond at the top of their run loop. */
	atomic_bool pause_requested;
	unsigned nparked;	    /* vCPUs parked now */
	pthread_cond_t pause_cond;  /* parked vCPUs wait here for resume or stop */
	pthread_cond_t parked_cond; /* the pauser waits here for nparked to reach the count */
};

/* Open /dev/kvm, check the API, create the VM with its irqchip, PIT and RAM. */
int vm_create(struct vm *vm, uint64_t ram_len, unsigned ncpus) __must_check;
/* The same with RAM mapped privately from a snapshot's memory files (mem_open_files, with
 * `first_fd`; none: a fresh memfd). */
int vm_create_from(struct vm *vm, uint64_t ram_len, unsigned ncpus, int first_fd,
		   const char *const *paths, unsigned npaths) __must_check;
/* Destroy the vCPUs, every device added with vm_device_add (the last first), the RAM and the
 * VM's fds. */
void vm_destroy(struct vm *vm);
/* Register `destroy(dev)` for vm_destroy: 0, or -ENOSPC past VM_DEVICES_MAX (the caller still
 * owns the device then). */
int vm_device_add(struct vm *vm, void *dev, void (*destroy)(void *dev)) __must_check;
/* Take back the last vm_device_add, of `dev`: its maker failed after registering it. */
void vm_device_cancel(struct vm *vm, void *dev);
/* Move the VM's fds (KVM's, the VM's, every vCPU's) to their JAIL_FD_* numbers, as the seccomp
 * filters name them; before the jail, with every vCPU created. 0 or -errno. */
int vm_place_fds(struct vm *vm) __must_check;
/* Ask every vCPU to stop; the first caller's status and reason are kept. Thread-safe. */
void vm_request_stop(struct vm *vm, enum vm_exit_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Create vCPU `index` and set its registers for `entry`. */
int vcpu_create(struct vm *vm, unsigned index, const struct boot_entry *entry) __must_check;
/* Create vCPU `index` with its CPUID only: its state comes from a snapshot. */
int vcpu_create_restored(struct vm *vm, unsigned index) __must_check;
/* Start every vCPU thread. */
int vcpu_start_all(struct vm *vm) __must_check;
/* Let the vCPU threads, waiting since they started (jailed, under their filters), run. Also what
 * stops them waiting when the VM stops first. */
void vcpu_release_all(struct vm *vm);
/* Kick every running vCPU out of KVM_RUN and join its thread. */
void vcpu_stop_all(struct vm *vm);
/* Stop every vCPU at a clean point (between two KVM_RUNs) and wait up to `timeout_ms` until
 * all are parked, using no CPU. -ETIMEDOUT when some did not park in time (they will when they
 * can), -ESHUTDOWN when the VM is stopping. Call from the I/O thread only. */
int vcpu_pause_all(struct vm *vm, unsigned timeout_ms) __must_check;
/* Let parked vCPUs run again (a no-op when not paused). Call from the I/O thread only. */
void vcpu_resume_all(struct vm *vm);
/* True between vcpu_pause_all and vcpu_resume_all. */
bool vcpu_paused(struct vm *vm);
void vcpu_destroy(struct vcpu *vcpu);

/* ---- serial.c: an 8250 UART at 0x3f8, IRQ 4, transmit only ---- */

/* The output fd receives every byte the guest transmits, until the file (its size at create
 * plus what was written) reaches SERIAL_OUT_MAX: later bytes are dropped after one notice
 * line. The VM's panic flag is set when the console shows a kernel panic (also past the cap). */
#define SERIAL_OUT_MAX (64ull << 20)
int serial_create(struct vm *vm, int out_fd, struct serial **out) __must_check;
/* Another cap than SERIAL_OUT_MAX (tests). */
void serial_set_output_max(struct serial *s, uint64_t bytes);
void serial_destroy(struct serial *s);

/* The registers as node "serial" of a snapshot, and back (serial_load checks them). */
struct snap_writer;
struct snap_reader;
void serial_save(struct serial *s, struct snap_writer *w);
int serial_load(struct serial *s, struct snap_reader *r, int parent) __must_check;

/* ---- i8042.c: just enough keyboard controller for the guest's reset ---- */
int i8042_create(struct vm *vm, struct i8042 **out) __must_check;
void i8042_destroy(struct i8042 *k);

/* ---- api.c: the control socket (--api PATH, wire/api_proto.h), served on the I/O thread ---- */
struct api;
/* Listen on the unix socket `path` (an existing socket file there is replaced) and serve
 * requests from vm->loop. */
int api_create(struct vm *vm, const char *path, struct api **out) __must_check;
/* Close every connection, stop listening and unlink the socket. */
void api_destroy(struct api *api);
/* The parsers of a client's bytes, which the fuzz target calls too. A request's header: the
 * whole message's length (header and payload), or -EPROTO for a bad magic or version, a
 * reply's type, a length over API_PAYLOAD_MAX or under its type's minimum (an unknown type
 * has none). */
struct api_hdr;
int api_msg_len(const struct api_hdr *h) __must_check;
/* A SNAPSHOT request's payload of `len` bytes (at least struct api_snapshot_req, which
 * api_msg_len checked): its flags and strings into `sr`, pointing into the payload. 0, or
 * -EINVAL with `msg` saying why (a bad count or flag, a string that runs off the end). */
struct snapshot_req;
int api_snapshot_parse(const uint8_t *payload, uint32_t len, struct snapshot_req *sr, char *msg,
		       size_t msg_len) __must_check;

/* ---- snap_cpu.c: KVM's state in a snapshot (vCPUs parked or not started) ---- */

/* Node "vcpu@index": registers, FPU/XSAVE, XCRs, MSRs, LAPIC, events, MP state, debug regs. */
int vcpu_save_state(struct vcpu *vcpu, struct snap_writer *w) __must_check;
int vcpu_load_state(struct vcpu *vcpu, struct snap_reader *r, int parent) __must_check;
/* Node "vm": the PICs, the IOAPIC, the PIT, kvmclock. */
int vm_save_state(struct vm *vm, struct snap_writer *w) __must_check;
int vm_load_state(struct vm *vm, struct snap_reader *r, int parent) __must_check;

/* ---- snapshot.c, restore.c: a VM to a directory and back (docs/snapshots.md) ---- */

#define SNAP_FORMAT_VERSION 1
#define SNAP_ARCH	    "x86_64"
#define SNAP_STATE_FILE	    "state.fdt"
#define SNAP_MEMORY_FILE    "memory"
#define SNAP_TOPS_MAX	    8

struct snapshot_req {
	const char *dir; /* an existing empty directory: state.fdt and memory go there */
	int dir_fd;	 /* >= 0: that directory, opened by the client (dir only names it) */
	/* For the n-th writable disk, the path of the new empty top layer it goes on over. */
	const char *new_tops[SNAP_TOPS_MAX];
	unsigned ntops;
	bool stop;    /* leave the vCPUs paused: the caller ends the VM next */
	bool live;    /* a fork: freeze RAM in place (mem_freeze) instead of writing it */
	bool durable; /* live: write the memory file too, after the guest runs again */
};

struct snapshot_stats {
	uint64_t pause_ns;     /* the vCPUs' paused time, as this VMM measured it */
	uint64_t total_ns;     /* the whole request */
	uint64_t state_bytes;  /* state.fdt */
	uint64_t memory_bytes; /* RAM bytes written (the rest are holes) */
	/* The memory file's page digest (wire/api_proto.h), of the bytes written; 0s: none. */
	uint8_t memory_sha256[32];
	/* live: the frozen RAM, /proc/<pid>/fd/<n>[,...] (mem_frozen_paths), while this VMM
	 * runs. */
	char memory_path[320];
};

/* Pause (unless paused), quiesce the devices, write state and memory, freeze the disks,
 * fsync, and resume (unless it was paused or req->stop). On failure `msg` says what failed
 * and the disks are as before unless freezing was reached. I/O thread only. */
int vm_snapshot(struct vm *vm, const struct snapshot_req *req, struct snapshot_stats *st, char *msg,
		size_t msg_len) __must_check;

/* A snapshot's state file, read and checked far enough to make the VM it describes. */
struct snap_image {
	void *buf;
	size_t len;
	struct snap_reader r; /* r.msg says why anything failed */
	uint64_t ram_len;
	uint32_t ncpus;
	uint32_t cpuid_nonce;
	uint32_t nvirtio;
};
/* Read DIR/state.fdt and parse it (snap_image_parse). */
int snap_image_open(const char *dir, struct snap_image *img) __must_check;
/* The same from `fd` (taken: closed), read once whole; `name` is for messages. */
int snap_image_read(int fd, const char *name, struct snap_image *img) __must_check;
/* Check img->buf (img->len bytes, malloc'ed, owned by img): the tree, the format, the
 * machine's size. */
int snap_image_parse(struct snap_image *img) __must_check;
void snap_image_close(struct snap_image *img);
/* Before the jail, into a VM made by vm_create_from with the image's RAM and vCPU count: the
 * VMM's CPUID leaves with the snapshot's nonce (vm_restore_cpuid), then the vCPUs with that
 * CPUID. 0 or -errno, with img->r.msg. */
int vm_restore_cpuid(struct vm *vm, struct snap_image *img) __must_check;
int vm_restore_vcpus(struct vm *vm, struct snap_image *img) __must_check;
/* Into that VM, with the same devices (serial, i8042, the virtio devices in order), jailed:
 * check CPUID, load the VM's, the devices' and every vCPU's state. */
int vm_restore(struct vm *vm, struct snap_image *img) __must_check;
/* Before the vCPUs run: reset vsock transports (their connections are gone) and let the other
 * devices look at their queues. I/O thread. */
void vm_restore_devices_resume(struct vm *vm);

#endif
