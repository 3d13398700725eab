/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/elf.c: parsing untrusted ELF64 files and loading their segments into fake guest RAM.
 * Every image is handed to elf_parse in a malloc'ed buffer of exactly its length, so ASan
 * catches any read past the end of the file.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "vmm.h"

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define PVH_ENTRY		 0x1000abcu
#define ENTRY			 0x100040ull
#define MAX_PH			 24
#define DATA_CAP		 0x2000

/* An ELF file under construction: the header and program headers are kept as structs (so a
 * test can break them) and written into `data` by fake_elf_bytes. */
struct fake_elf {
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PH];
	uint8_t data[DATA_CAP];
	size_t len;
};

/* Write one note at `at`; returns its size with padding. */
static size_t put_note(uint8_t *at, const char *name, uint32_t namesz, uint32_t type,
		       const void *desc, uint32_t descsz)
{
	Elf64_Nhdr nh = {.n_namesz = namesz, .n_descsz = descsz, .n_type = type};
	size_t name_len = (namesz + 3u) & ~3u, desc_len = (descsz + 3u) & ~3u;

	memcpy(at, &nh, sizeof(nh));
	memset(at + sizeof(nh), 0, name_len + desc_len);
	memcpy(at + sizeof(nh), name, namesz);
	memcpy(at + sizeof(nh) + name_len, desc, descsz);
	return sizeof(nh) + name_len + desc_len;
}

/*
 * The good image, a vmlinux in miniature:
 *   PT_LOAD  file 0x1000+0x100 -> paddr 0x100000 (vaddr in the kernel's high half)
 *   PT_LOAD  file 0x1100+0x80  -> paddr 0x200000, memsz 0x2000 (bss)
 *   PT_NOTE  file 0x1200+20: the Xen PVH entry note
 *   PT_GNU_STACK
 */
static void fake_elf_default(struct fake_elf *f)
{
	const uint32_t pvh = PVH_ENTRY;

	memset(f, 0, sizeof(*f));
	memcpy(f->eh.e_ident, ELFMAG, SELFMAG);
	f->eh.e_ident[EI_CLASS] = ELFCLASS64;
	f->eh.e_ident[EI_DATA] = ELFDATA2LSB;
	f->eh.e_ident[EI_VERSION] = EV_CURRENT;
	f->eh.e_type = ET_EXEC;
	f->eh.e_machine = EM_X86_64;
	f->eh.e_version = EV_CURRENT;
	f->eh.e_entry = ENTRY;
	f->eh.e_phoff = sizeof(Elf64_Ehdr);
	f->eh.e_ehsize = sizeof(Elf64_Ehdr);
	f->eh.e_phentsize = sizeof(Elf64_Phdr);
	f->eh.e_phnum = 4;
	f->ph[0] = (Elf64_Phdr){.p_type = PT_LOAD,
				.p_flags = PF_R | PF_X,
				.p_offset = 0x1000,
				.p_vaddr = 0xffffffff81000000ull,
				.p_paddr = 0x100000,
				.p_filesz = 0x100,
				.p_memsz = 0x100,
				.p_align = 0x1000};
	f->ph[1] = (Elf64_Phdr){.p_type = PT_LOAD,
				.p_flags = PF_R | PF_W,
				.p_offset = 0x1100,
				.p_vaddr = 0xffffffff81100000ull,
				.p_paddr = 0x200000,
				.p_filesz = 0x80,
				.p_memsz = 0x2000,
				.p_align = 0x1000};
	f->ph[2] = (Elf64_Phdr){.p_type = PT_NOTE,
				.p_flags = PF_R,
				.p_offset = 0x1200,
				.p_filesz = 20,
				.p_align = 4};
	f->ph[3] = (Elf64_Phdr){.p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W};
	for (size_t i = 0; i < 0x100; i++)
		f->data[0x1000 + i] = (uint8_t)(i ^ 0x5a);
	memset(f->data + 0x1100, 0xc3, 0x80);
	put_note(f->data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 4);
	f->len = 0x1300;
}

/* The file's bytes in a heap buffer of exactly f->len bytes; free() it. */
static uint8_t *fake_elf_bytes(struct fake_elf *f)
{
	uint8_t *buf;
	size_t phlen = (size_t)f->eh.e_phnum * sizeof(Elf64_Phdr);

	memcpy(f->data, &f->eh, sizeof(f->eh));
	if (f->eh.e_phoff == sizeof(Elf64_Ehdr) && f->eh.e_phnum <= MAX_PH)
		memcpy(f->data + f->eh.e_phoff, f->ph, phlen);
	buf = malloc(f->len ? f->len : 1);
	cr_assert(buf != NULL);
	memcpy(buf, f->data, f->len);
	return buf;
}

static int parse(struct fake_elf *f, struct elf_image *elf)
{
	uint8_t *buf = fake_elf_bytes(f);
	int err = elf_parse(buf, f->len, elf);

	free(buf);
	return err;
}

static void check_segment(const struct elf_segment *s, uint64_t offset, uint64_t filesz,
			  uint64_t memsz, gpa_t paddr)
{
	cr_assert(eq(u64, s->offset, offset));
	cr_assert(eq(u64, s->filesz, filesz));
	cr_assert(eq(u64, s->memsz, memsz));
	cr_assert(eq(u64, s->paddr, paddr));
}

/* ---- elf_parse: good files ---- */

Test(elf_parse, good_vmlinux)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.entry, ENTRY));
	cr_assert(eq(u64, elf.pvh_entry, PVH_ENTRY));
	cr_assert(eq(u32, elf.nsegments, 2));
	/* p_paddr, not p_vaddr. */
	check_segment(&elf.segments[0], 0x1000, 0x100, 0x100, 0x100000);
	check_segment(&elf.segments[1], 0x1100, 0x80, 0x2000, 0x200000);
}

Test(elf_parse, no_note_means_no_pvh_entry)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[2].p_type = PT_NULL;
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.pvh_entry, 0));
	cr_assert(eq(u32, elf.nsegments, 2));
}

Test(elf_parse, xen_note_after_other_notes)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint8_t build_id[20] = {1, 2, 3};
	const uint32_t pvh = 0x1234567, other = 0x99;
	size_t off = 0x1200;

	fake_elf_default(&f);
	off += put_note(f.data + off, "GNU", 4, NT_GNU_BUILD_ID, build_id, sizeof(build_id));
	/* A 6-byte name and a 3-byte desc: both padded to 4. */
	off += put_note(f.data + off, "Linux", 6, 6, &other, 3);
	/* Right name, another Xen note type. */
	off += put_note(f.data + off, "Xen", 4, 17, &other, 4);
	off += put_note(f.data + off, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 4);
	f.ph[2].p_filesz = off - 0x1200;
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.pvh_entry, 0x1234567));
}

Test(elf_parse, note_with_wrong_name_ignored)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint32_t pvh = PVH_ENTRY;

	fake_elf_default(&f);
	put_note(f.data + 0x1200, "Xem", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 4);
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.pvh_entry, 0));
}

Test(elf_parse, eight_byte_pvh_entry)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint64_t pvh = 0x123456789ull;

	fake_elf_default(&f);
	f.ph[2].p_filesz = put_note(f.data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 8);
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.pvh_entry, 0x123456789ull));
}

Test(elf_parse, note_in_a_second_note_segment)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint8_t build_id[8] = {0};
	const uint32_t pvh = 0x2000000;

	fake_elf_default(&f);
	f.ph[2].p_filesz = put_note(f.data + 0x1200, "GNU", 4, NT_GNU_BUILD_ID, build_id, 8);
	f.ph[3] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = 0x1280, .p_filesz = 20};
	put_note(f.data + 0x1280, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 4);
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u64, elf.pvh_entry, 0x2000000));
}

Test(elf_parse, empty_loads_are_skipped)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[3] = (Elf64_Phdr){.p_type = PT_LOAD, .p_offset = 0x1000, .p_paddr = 0x300000};
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u32, elf.nsegments, 2));
}

Test(elf_parse, sixteen_loads_fit)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.eh.e_phnum = ELF_MAX_SEGMENTS + 1;
	for (unsigned i = 0; i < ELF_MAX_SEGMENTS; i++)
		f.ph[i] = (Elf64_Phdr){.p_type = PT_LOAD,
				       .p_offset = 0x1000 + i * 0x10,
				       .p_paddr = 0x100000 + i * 0x1000,
				       .p_filesz = 0x10,
				       .p_memsz = 0x1000};
	f.ph[ELF_MAX_SEGMENTS] = (Elf64_Phdr){.p_type = PT_LOAD}; /* empty: not counted */
	cr_assert(eq(int, parse(&f, &elf), 0));
	cr_assert(eq(u32, elf.nsegments, ELF_MAX_SEGMENTS));
	check_segment(&elf.segments[15], 0x10f0, 0x10, 0x1000, 0x10f000);
}

/* ---- elf_parse: refused files ---- */

Test(elf_parse, rejects_too_short)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.len = sizeof(Elf64_Ehdr) - 1;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
	f.len = 0;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
	/* The header alone: the program headers are past the end. */
	f.len = sizeof(Elf64_Ehdr);
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
}

Test(elf_parse, rejects_bad_magic)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.eh.e_ident[EI_MAG1] = 'e';
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
	fake_elf_default(&f);
	f.eh.e_ident[EI_MAG0] = 0;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
}

Test(elf_parse, rejects_other_kinds_of_elf)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.eh.e_ident[EI_CLASS] = ELFCLASS32;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "ELFCLASS32");
	fake_elf_default(&f);
	f.eh.e_ident[EI_DATA] = ELFDATA2MSB;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "big endian");
	fake_elf_default(&f);
	f.eh.e_machine = EM_386;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "EM_386");
	fake_elf_default(&f);
	f.eh.e_machine = EM_AARCH64;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "EM_AARCH64");
	fake_elf_default(&f);
	f.eh.e_type = ET_DYN;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "ET_DYN");
	fake_elf_default(&f);
	f.eh.e_type = ET_REL;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "ET_REL");
	fake_elf_default(&f);
	f.eh.e_type = ET_CORE;
	cr_assert(eq(int, parse(&f, &elf), -EPROTO), "ET_CORE");
}

Test(elf_parse, rejects_bad_program_header_table)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.eh.e_phentsize = sizeof(Elf32_Phdr);
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "phentsize");
	fake_elf_default(&f);
	f.eh.e_phnum = 0;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "phnum 0");
	fake_elf_default(&f);
	f.eh.e_phoff = f.len;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "phoff at the end of the file");
	fake_elf_default(&f);
	f.eh.e_phoff = f.len - sizeof(Elf64_Phdr); /* room for one of four */
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "table runs past the end");
	fake_elf_default(&f);
	f.eh.e_phoff = UINT64_MAX - 8;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "phoff + size wraps");
	fake_elf_default(&f);
	f.eh.e_phnum = 0xffff; /* 3.5 MiB of program headers in a 4.75 KiB file */
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "phnum * phentsize beyond the file");
}

Test(elf_parse, rejects_filesz_above_memsz)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[1].p_memsz = f.ph[1].p_filesz - 1;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
}

Test(elf_parse, rejects_segment_beyond_the_file)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[1].p_filesz = f.len - f.ph[1].p_offset + 1;
	f.ph[1].p_memsz = 0x2000;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "one byte past the end");
	fake_elf_default(&f);
	f.ph[0].p_offset = f.len + 0x1000;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "offset past the end");
	fake_elf_default(&f);
	f.ph[0].p_offset = UINT64_MAX - 0x10;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "offset + filesz wraps");
	fake_elf_default(&f);
	f.ph[0].p_filesz = UINT64_MAX;
	f.ph[0].p_memsz = UINT64_MAX;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "filesz huge");

	/* Exactly to the end of the file is fine. */
	fake_elf_default(&f);
	f.ph[1].p_filesz = f.len - f.ph[1].p_offset;
	cr_assert(eq(int, parse(&f, &elf), 0));
}

Test(elf_parse, rejects_paddr_overflow)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[1].p_paddr = UINT64_MAX - 0xfff;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "paddr + memsz wraps past 0");
	/* Ending exactly at 2^64 wraps to 0 too. */
	f.ph[1].p_paddr = 0ull - f.ph[1].p_memsz;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "paddr + memsz == 2^64");
	f.ph[1].p_paddr = 0ull - f.ph[1].p_memsz - 1;
	cr_assert(eq(int, parse(&f, &elf), 0), "ends at the last byte");
}

Test(elf_parse, rejects_note_segment_beyond_the_file)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[2].p_filesz = f.len - f.ph[2].p_offset + 1;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
	fake_elf_default(&f);
	f.ph[2].p_offset = UINT64_MAX - 4;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC));
}

Test(elf_parse, rejects_too_many_loads)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.eh.e_phnum = ELF_MAX_SEGMENTS + 1;
	for (unsigned i = 0; i <= ELF_MAX_SEGMENTS; i++)
		f.ph[i] = (Elf64_Phdr){.p_type = PT_LOAD,
				       .p_offset = 0x1000 + i * 0x10,
				       .p_paddr = 0x100000 + i * 0x1000,
				       .p_filesz = 0x10,
				       .p_memsz = 0x1000};
	cr_assert(eq(int, parse(&f, &elf), -E2BIG));
}

Test(elf_parse, rejects_no_loads)
{
	struct fake_elf f;
	struct elf_image elf;

	fake_elf_default(&f);
	f.ph[0].p_type = PT_NULL;
	f.ph[1].p_type = PT_NULL;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "notes only");
	fake_elf_default(&f);
	f.ph[0].p_memsz = f.ph[0].p_filesz = 0;
	f.ph[1].p_memsz = f.ph[1].p_filesz = 0;
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "empty loads only");
}

/* A note whose sizes run past its segment is never read past the segment (ASan would stop
 * us), and gives no PVH entry. */
Test(elf_parse, overlong_note_not_read)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint64_t pvh = 0x123456789ull;

	fake_elf_default(&f);
	/* An 8-byte desc in a 20-byte segment at the very end of the file. */
	put_note(f.data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 8);
	f.len = 0x1200 + 20;
	(void)parse(&f, &elf);
	cr_assert(eq(u64, elf.pvh_entry, 0));

	fake_elf_default(&f);
	put_note(f.data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 4);
	memcpy(f.data + 0x1204, &(uint32_t){0xfffffff0}, 4); /* n_descsz */
	f.len = 0x1200 + 20;
	(void)parse(&f, &elf);
	cr_assert(eq(u64, elf.pvh_entry, 0));
}

/*
 * A malformed note makes the whole file malformed: a Xen PHYS32_ENTRY note whose descriptor is
 * neither 4 nor 8 bytes, or a note running past its segment, is refused, not skipped (a
 * skipped bad note used to hide a good one after it).
 */
Test(elf_parse, rejects_malformed_note)
{
	struct fake_elf f;
	struct elf_image elf;
	const uint64_t pvh = 0x123456789ull;
	const uint32_t six[2] = {0};

	/* The note's desc runs 4 bytes past its segment (but not past the file). */
	fake_elf_default(&f);
	put_note(f.data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, &pvh, 8);
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "note runs past its segment");

	/* A PHYS32_ENTRY note with a 6-byte entry point. */
	fake_elf_default(&f);
	f.ph[2].p_filesz = put_note(f.data + 0x1200, "Xen", 4, XEN_ELFNOTE_PHYS32_ENTRY, six, 6);
	cr_assert(eq(int, parse(&f, &elf), -ENOEXEC), "6-byte PVH entry");
}

/* ---- elf_load ---- */

#define RAM_LEN (4 * MIB)

struct loaded {
	struct guest_mem mem;
	uint8_t *ram;
	uint8_t *file;
	struct elf_image elf;
};

static void load_setup(struct loaded *l, struct fake_elf *f)
{
	l->ram = fake_mem_create(&l->mem, RAM_LEN, 0xa5);
	l->file = fake_elf_bytes(f);
	cr_assert(eq(int, elf_parse(l->file, f->len, &l->elf), 0));
}

static void load_teardown(struct loaded *l)
{
	free(l->file);
	fake_mem_destroy(&l->mem);
}

Test(elf_load, copies_segments_and_zeroes_bss)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	load_setup(&l, &f);
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, KERNEL_GPA, RAM_LEN), 0));
	cr_assert(eq(int, memcmp(l.ram + 0x100000, f.data + 0x1000, 0x100), 0));
	cr_assert(fake_mem_all(l.ram + 0x200000, 0x80, 0xc3), "second segment's file bytes");
	cr_assert(fake_mem_all(l.ram + 0x200080, 0x2000 - 0x80, 0), "bss zero-filled");
	/* Nothing around the segments is touched. */
	cr_assert(eq(u8, l.ram[0xfffff], 0xa5));
	cr_assert(eq(u8, l.ram[0x100100], 0xa5));
	cr_assert(eq(u8, l.ram[0x1fffff], 0xa5));
	cr_assert(eq(u8, l.ram[0x202000], 0xa5));
	cr_assert(fake_mem_all(l.ram, 0x100000, 0xa5));
	load_teardown(&l);
}

Test(elf_load, bss_only_segment)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	f.ph[1].p_filesz = 0;
	load_setup(&l, &f);
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, KERNEL_GPA, RAM_LEN), 0));
	cr_assert(fake_mem_all(l.ram + 0x200000, 0x2000, 0));
	cr_assert(eq(u8, l.ram[0x202000], 0xa5));
	load_teardown(&l);
}

Test(elf_load, limits_are_inclusive_exclusive)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	load_setup(&l, &f);
	/* min_gpa == the lowest paddr, max_gpa == the end of the highest segment: fine. */
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, 0x100000, 0x202000), 0));
	load_teardown(&l);
}

Test(elf_load, below_min_refused_ram_untouched)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	load_setup(&l, &f);
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, 0x100001, RAM_LEN), -ERANGE));
	cr_assert(fake_mem_all(l.ram, RAM_LEN, 0xa5), "RAM written by a refused load");
	load_teardown(&l);
}

Test(elf_load, above_max_refused_ram_untouched)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	load_setup(&l, &f);
	/* The first segment is fine; the second (bss included) ends one byte above max_gpa. */
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, KERNEL_GPA, 0x201fff), -ERANGE));
	cr_assert(fake_mem_all(l.ram, RAM_LEN, 0xa5), "RAM written by a refused load");
	load_teardown(&l);
}

Test(elf_load, beyond_ram_refused_ram_untouched)
{
	struct fake_elf f;
	struct loaded l;

	fake_elf_default(&f);
	f.ph[1].p_paddr = RAM_LEN - 0x1000; /* its 0x2000 bytes end 4 KiB past RAM */
	load_setup(&l, &f);
	cr_assert(eq(int, elf_load(&l.mem, l.file, &l.elf, KERNEL_GPA, UINT64_MAX), -ERANGE));
	cr_assert(fake_mem_all(l.ram, RAM_LEN, 0xa5), "RAM written by a refused load");
	load_teardown(&l);
}

/* Segments in or across the MMIO hole of a guest with RAM above 4 GiB. */
Test(elf_load, mmio_hole_refused)
{
	static const gpa_t bad[] = {
		MMIO_HOLE_GPA,	  /* the hole's first byte */
		VIRTIO_MMIO_GPA,  /* a device window */
		3 * GIB - 0x1000, /* low RAM into the hole */
		4 * GIB - 0x1000, /* the hole into high RAM */
	};
	struct fake_elf f;
	struct guest_mem mem;
	struct elf_image elf;
	uint8_t *ram, *file;

	ram = fake_mem_create(&mem, 5 * GIB, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_elf_default(&f);
		f.ph[1].p_paddr = bad[i];
		file = fake_elf_bytes(&f);
		cr_assert(eq(int, elf_parse(file, f.len, &elf), 0));
		ram[0x100000] = 0x77;
		cr_assert(eq(int, elf_load(&mem, file, &elf, KERNEL_GPA, UINT64_MAX), -ERANGE),
			  "segment at %#llx", (unsigned long long)bad[i]);
		cr_assert(eq(u8, ram[0x100000], 0x77), "first segment copied anyway");
		free(file);
	}
	fake_mem_destroy(&mem);
}

Test(elf_load, high_ram_lands_after_low_ram)
{
	struct fake_elf f;
	struct guest_mem mem;
	struct elf_image elf;
	uint8_t *ram, *file;

	ram = fake_mem_create(&mem, 5 * GIB, 0);
	fake_elf_default(&f);
	f.ph[1].p_paddr = 4 * GIB + 0x1000;
	file = fake_elf_bytes(&f);
	cr_assert(eq(int, elf_parse(file, f.len, &elf), 0));
	memset(ram + 3 * GIB + 0x1000, 0xa5, 0x3000);
	cr_assert(eq(int, elf_load(&mem, file, &elf, KERNEL_GPA, mem_top(&mem)), 0));
	cr_assert(fake_mem_all(ram + 3 * GIB + 0x1000, 0x80, 0xc3));
	cr_assert(fake_mem_all(ram + 3 * GIB + 0x1080, 0x2000 - 0x80, 0));
	cr_assert(eq(u8, ram[3 * GIB + 0x3000], 0xa5));
	free(file);
	fake_mem_destroy(&mem);
}
