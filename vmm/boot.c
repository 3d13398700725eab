/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Putting a guest into RAM: a bzImage (Linux 64-bit boot protocol), an ELF vmlinux (PVH entry)
 * or a payload ELF (payload_abi.h), plus the initrd, the command line and every structure the
 * first instruction relies on. Every failure is reported once, naming the file and the reason,
 * so that main() only has to turn it into an exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asm/bootparam.h>

#include "layout.h"
#include "payload_abi.h"
#include "pvh.h"
#include "vmm.h"

#define BOOT_FILE_MAX	   (1ull << 30) /* no kernel or initrd we accept is larger */
#define PAGE_ALIGN_DOWN(x) ((x) & ~0xfffull)
#define PAGE_ALIGN_UP(x)   (((x) + 0xfffull) & ~0xfffull)
#define MIB		   (1ull << 20)

struct boot_file {
	const char *path;
	uint8_t *buf;
	size_t len;
};

/* Map a whole file read-only. */
static int boot_file_open(struct boot_file *f, const char *path, const char *what)
{
	struct stat st;
	void *p;
	int fd, err = 0;

	f->path = path;
	f->buf = NULL;
	f->len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		log_error("cannot open %s %s: %s", what, path, strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = -EINVAL;
		log_error("%s %s is not a regular file", what, path);
		goto out;
	}
	if (st.st_size == 0 || (uint64_t)st.st_size > BOOT_FILE_MAX) {
		err = -EINVAL;
		log_error("%s %s has an unusable size (%lld bytes)", what, path,
			  (long long)st.st_size);
		goto out;
	}
	/* MAP_POPULATE: the file is read whole right after, so map it in one go. */
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		log_error("cannot map %s %s: %s", what, path, strerror(errno));
		goto out;
	}
	f->buf = p;
	f->len = (size_t)st.st_size;
out:
	close(fd);
	return err;
}

static void boot_file_close(struct boot_file *f)
{
	if (f->buf)
		munmap(f->buf, f->len);
	f->buf = NULL;
}

/* Write the command line at CMDLINE_GPA; `max` is the longest the kernel accepts. */
static int boot_write_cmdline(const struct guest_mem *mem, const char *cmdline, size_t max,
			      uint32_t *len_out)
{
	size_t len = strlen(cmdline);

	if (max > CMDLINE_MAX - 1)
		max = CMDLINE_MAX - 1;
	if (len > max) {
		log_error(
			"kernel command line too long: %zu bytes, this kernel accepts at most %zu",
			len, max);
		return -E2BIG;
	}
	*len_out = (uint32_t)len;
	return mem_write(mem, CMDLINE_GPA, cmdline, len + 1);
}

/* Place the initrd page-aligned at the top of low RAM, below `limit`, above `floor`. */
static int boot_load_initrd(const struct guest_mem *mem, const char *path, gpa_t floor, gpa_t limit,
			    gpa_t *gpa_out, uint64_t *len_out)
{
	struct boot_file f;
	gpa_t top = mem_low_end(mem), gpa;
	int err;

	*gpa_out = 0;
	*len_out = 0;
	if (!path)
		return 0;
	err = boot_file_open(&f, path, "initrd");
	if (err)
		return err;
	if (limit < top)
		top = limit;
	if (f.len > top || PAGE_ALIGN_DOWN(top - f.len) < PAGE_ALIGN_UP(floor)) {
		log_error("initrd %s (%zu KiB) does not fit in guest RAM above the kernel "
			  "(%llu KiB free): give the guest more memory",
			  path, f.len >> 10,
			  (unsigned long long)(top > floor ? (top - floor) >> 10 : 0));
		err = -ENOSPC;
		goto out;
	}
	gpa = PAGE_ALIGN_DOWN(top - f.len);
	err = mem_write(mem, gpa, f.buf, f.len);
	*gpa_out = gpa;
	*len_out = f.len;
out:
	boot_file_close(&f);
	return err;
}

static int boot_load_bzimage(const struct guest_mem *mem, const struct boot_config *cfg,
			     const struct boot_file *kf, struct boot_entry *entry)
{
	struct boot_params bp;
	struct bzimage bz;
	gpa_t kernel_end, initrd_gpa;
	uint64_t initrd_len;
	uint32_t cmdline_len;
	int err;

	err = bzimage_parse(kf->buf, kf->len, &bz);
	if (err == -ENODATA) {
		log_error("kernel %s is a truncated bzImage (%zu bytes)", kf->path, kf->len);
		return err;
	}
	if (err == -EPROTO) {
		log_error("kernel %s: bzImage without a 64-bit entry point or boot protocol < 2.12",
			  kf->path);
		return err;
	}
	if (err) {
		log_error("kernel %s is not a Linux kernel (neither a bzImage nor an ELF vmlinux)",
			  kf->path);
		return err;
	}
	/* The kernel runs from 1 MiB and decompresses itself at pref_address; it needs
	 * init_size bytes from the higher of the two. */
	kernel_end = (bz.pref_address > KERNEL_GPA ? bz.pref_address : KERNEL_GPA) + bz.init_size;
	if (kernel_end < KERNEL_GPA + bz.kernel_len)
		kernel_end = KERNEL_GPA + bz.kernel_len;
	if (kernel_end > mem_low_end(mem)) {
		log_error("guest memory too small for kernel %s: it needs %llu MiB", kf->path,
			  (unsigned long long)((kernel_end + MIB - 1) / MIB));
		return -ENOSPC;
	}
	err = mem_write(mem, KERNEL_GPA, bz.kernel, bz.kernel_len);
	if (err)
		return err;
	err = boot_write_cmdline(mem, cfg->cmdline, bz.cmdline_max, &cmdline_len);
	if (err)
		return err;
	err = boot_load_initrd(mem, cfg->initrd_path, kernel_end, (gpa_t)bz.initrd_addr_max + 1,
			       &initrd_gpa, &initrd_len);
	if (err)
		return err;
	bootparams_build(&bp, &bz, mem, CMDLINE_GPA, initrd_gpa, initrd_len);
	err = mem_write(mem, BOOT_PARAMS_GPA, &bp, sizeof(bp));
	if (err)
		return err;
	entry->mode = BOOT_LINUX64;
	entry->rip = KERNEL_GPA + 0x200; /* startup_64 */
	entry->arg_gpa = BOOT_PARAMS_GPA;
	return 0;
}

/* The highest byte + 1 that any segment of `elf` occupies. */
static gpa_t boot_elf_end(const struct elf_image *elf)
{
	gpa_t end = 0;

	for (unsigned i = 0; i < elf->nsegments; i++)
		if (elf->segments[i].paddr + elf->segments[i].memsz > end)
			end = elf->segments[i].paddr + elf->segments[i].memsz;
	return end;
}

static int boot_load_pvh(const struct guest_mem *mem, const struct boot_config *cfg,
			 const struct boot_file *kf, const struct elf_image *elf,
			 struct boot_entry *entry)
{
	struct pvh_boot pb;
	gpa_t initrd_gpa;
	uint64_t initrd_len;
	uint32_t cmdline_len;
	int err;

	if (!elf->pvh_entry) {
		log_error("kernel %s is an ELF without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY)",
			  kf->path);
		return -ENOEXEC;
	}
	err = elf_load(mem, kf->buf, elf, KERNEL_GPA, mem_low_end(mem));
	if (err) {
		log_error("guest memory too small for kernel %s, or its segments lie outside RAM "
			  "(they end at %llu MiB)",
			  kf->path, (unsigned long long)(boot_elf_end(elf) >> 20));
		return err;
	}
	err = boot_write_cmdline(mem, cfg->cmdline, CMDLINE_MAX - 1, &cmdline_len);
	if (err)
		return err;
	err = boot_load_initrd(mem, cfg->initrd_path, boot_elf_end(elf), mem_low_end(mem),
			       &initrd_gpa, &initrd_len);
	if (err)
		return err;
	pvh_build(&pb, mem, CMDLINE_GPA, initrd_gpa, initrd_len);
	if ((err = mem_write(mem, PVH_INFO_GPA, &pb.info, sizeof(pb.info))) ||
	    (err = mem_write(mem, PVH_MEMMAP_GPA, pb.memmap, sizeof(pb.memmap))) ||
	    (err = mem_write(mem, PVH_MODLIST_GPA, &pb.module, sizeof(pb.module))))
		return err;
	entry->mode = BOOT_PVH;
	entry->rip = elf->pvh_entry;
	entry->arg_gpa = PVH_INFO_GPA;
	return 0;
}

static int boot_load_payload(const struct guest_mem *mem, const struct boot_config *cfg,
			     const struct boot_file *kf, struct boot_entry *entry)
{
	struct payload_info info;
	struct elf_image elf;
	gpa_t stacks = mem_low_end(mem) - (uint64_t)cfg->ncpus * PAYLOAD_STACK_LEN;
	bool entry_ok = false;
	int err;

	err = elf_parse(kf->buf, kf->len, &elf);
	if (err) {
		log_error("payload %s is not a static x86-64 ELF executable", kf->path);
		return err;
	}
	err = elf_load(mem, kf->buf, &elf, PAYLOAD_LOAD_MIN, stacks);
	if (err) {
		log_error("payload %s: a segment lies outside guest RAM [%#llx, %#llx)", kf->path,
			  (unsigned long long)PAYLOAD_LOAD_MIN, (unsigned long long)stacks);
		return err;
	}
	for (unsigned i = 0; i < elf.nsegments; i++)
		if (elf.entry >= elf.segments[i].paddr &&
		    elf.entry - elf.segments[i].paddr < elf.segments[i].memsz)
			entry_ok = true;
	if (!entry_ok) {
		log_error("payload %s: entry point %#llx is not inside a loaded segment", kf->path,
			  (unsigned long long)elf.entry);
		return -ENOEXEC;
	}
	memset(&info, 0, sizeof(info));
	info.magic = PAYLOAD_INFO_MAGIC;
	info.version = PAYLOAD_ABI_VERSION;
	info.ncpus = cfg->ncpus;
	info.cpuid_nonce = cfg->cpuid_nonce;
	info.nranges = mem->nregions;
	info.ram_len = mem->ram_len;
	info.stacks_gpa = stacks;
	info.mmio_base_gpa = VIRTIO_MMIO_GPA;
	for (unsigned i = 0; i < mem->nregions; i++) {
		info.ram[i].gpa = mem->regions[i].gpa;
		info.ram[i].len = mem->regions[i].len;
	}
	entry->mode = BOOT_PAYLOAD;
	entry->rip = elf.entry;
	entry->arg_gpa = PAYLOAD_INFO_GPA;
	entry->stacks_gpa = stacks;
	/* map_end is only known once the page tables are built: written by boot_load. */
	return mem_write(mem, PAYLOAD_INFO_GPA, &info, sizeof(info));
}

int boot_load(const struct guest_mem *mem, const struct boot_config *cfg, struct boot_entry *entry)
{
	struct boot_file kf;
	struct elf_image elf;
	int err;

	memset(entry, 0, sizeof(*entry));
	err = boot_file_open(&kf, cfg->kernel_path, cfg->payload ? "payload" : "kernel");
	if (err)
		return err;
	if (cfg->payload)
		err = boot_load_payload(mem, cfg, &kf, entry);
	else if (kf.len >= 4 && memcmp(kf.buf, "\177ELF", 4) == 0) {
		err = elf_parse(kf.buf, kf.len, &elf);
		if (err)
			log_error("kernel %s is not a valid x86-64 ELF vmlinux", kf.path);
		else
			err = boot_load_pvh(mem, cfg, &kf, &elf, entry);
	} else
		err = boot_load_bzimage(mem, cfg, &kf, entry);
	boot_file_close(&kf);
	if (err)
		return err;

	err = pagetable_build(mem, entry->mode == BOOT_PAYLOAD, &entry->map_end);
	if (err) {
		log_error("cannot build the boot page tables: %s", strerror(-err));
		return err;
	}
	if (entry->mode == BOOT_PAYLOAD) {
		struct payload_info *info = mem_gpa_to_hva(mem, PAYLOAD_INFO_GPA, sizeof(*info));

		info->map_end = entry->map_end;
	}
	if ((err = gdt_write(mem)) || (err = mptable_write(mem, cfg->ncpus))) {
		log_error("cannot write the boot tables: %s", strerror(-err));
		return err;
	}
	return 0;
}
