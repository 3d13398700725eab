/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF64 loading for vmlinux (with its PVH entry note) and for payload guests. The file is
 * untrusted: headers, program headers and notes are bounds-checked before use, sizes are
 * checked for overflow, and segments are only copied through mem_gpa_to_hva.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "vmm.h"

#define XEN_ELFNOTE_PHYS32_ENTRY 18

/* True when [off, off+size) lies inside a buffer of `len` bytes. */
static bool elf_in_bounds(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

/* Scan the notes in [off, off+size) for the PVH entry point. */
static int elf_find_pvh_note(const uint8_t *buf, uint64_t off, uint64_t size, uint64_t *entry)
{
	uint64_t end = off + size;

	while (end - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		uint64_t name_len, desc_len, total;

		memcpy(&nh, buf + off, sizeof(nh));
		name_len = ((uint64_t)nh.n_namesz + 3) & ~3ull;
		desc_len = ((uint64_t)nh.n_descsz + 3) & ~3ull;
		total = sizeof(nh) + name_len + desc_len;
		if (total > end - off)
			return -ENOEXEC;
		if (nh.n_type == XEN_ELFNOTE_PHYS32_ENTRY && nh.n_namesz == 4 &&
		    memcmp(buf + off + sizeof(nh), "Xen", 4) == 0) {
			const uint8_t *desc = buf + off + sizeof(nh) + name_len;
			uint32_t e32;

			/* Linux emits a 4-byte entry (.long); accept an 8-byte one too. */
			if (nh.n_descsz == 4) {
				memcpy(&e32, desc, 4);
				*entry = e32;
			} else if (nh.n_descsz == 8) {
				memcpy(entry, desc, 8);
			} else {
				return -ENOEXEC;
			}
			return 0;
		}
		off += total;
	}
	return -ENOENT;
}

int elf_parse(const uint8_t *buf, size_t len, struct elf_image *elf)
{
	Elf64_Ehdr eh;

	memset(elf, 0, sizeof(*elf));
	if (len < sizeof(eh))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64 || eh.e_type != ET_EXEC)
		return -EPROTO;
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
	    !elf_in_bounds(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), len))
		return -ENOEXEC;
	elf->entry = eh.e_entry;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, buf + eh.e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_NOTE) {
			uint64_t entry;

			if (!elf_in_bounds(ph.p_offset, ph.p_filesz, len))
				return -ENOEXEC;
			int err = elf_find_pvh_note(buf, ph.p_offset, ph.p_filesz, &entry);

			/* A malformed note is a malformed file; no PVH note is fine (payloads). */
			if (err == 0)
				elf->pvh_entry = entry;
			else if (err != -ENOENT)
				return err;
			continue;
		}
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (ph.p_filesz > ph.p_memsz || !elf_in_bounds(ph.p_offset, ph.p_filesz, len) ||
		    ph.p_paddr + ph.p_memsz < ph.p_paddr)
			return -ENOEXEC;
		if (elf->nsegments == ELF_MAX_SEGMENTS)
			return -E2BIG;
		elf->segments[elf->nsegments++] = (struct elf_segment){.offset = ph.p_offset,
								       .filesz = ph.p_filesz,
								       .memsz = ph.p_memsz,
								       .paddr = ph.p_paddr};
	}
	return elf->nsegments ? 0 : -ENOEXEC;
}

int elf_load(const struct guest_mem *mem, const uint8_t *buf, const struct elf_image *elf,
	     gpa_t min_gpa, gpa_t max_gpa)
{
	/* Check every segment before copying any, so a refused file leaves RAM untouched. */
	for (unsigned i = 0; i < elf->nsegments; i++) {
		const struct elf_segment *s = &elf->segments[i];

		if (s->paddr < min_gpa || s->paddr + s->memsz > max_gpa ||
		    !mem_gpa_to_hva(mem, s->paddr, s->memsz))
			return -ERANGE;
	}
	for (unsigned i = 0; i < elf->nsegments; i++) {
		const struct elf_segment *s = &elf->segments[i];
		uint8_t *dst = mem_gpa_to_hva(mem, s->paddr, s->memsz);

		memcpy(dst, buf + s->offset, s->filesz);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
	return 0;
}
