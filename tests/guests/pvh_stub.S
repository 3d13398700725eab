/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pvh-stub: the least a PVH guest can do, to time QEMU microvm's own start-up cost.
 *
 * An ELF32 file with a Xen PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY), bootable by
 * `qemu-system-x86_64 -M microvm -no-reboot -kernel pvh-stub`. Its entry runs in 32-bit
 * protected mode with paging off (the PVH boot ABI): it writes '!' to the UART, then asks an
 * i8042 for a reset. QEMU microvm has no i8042, so the stub then triple-faults (an empty IDT
 * and an invalid opcode), which ends QEMU under -no-reboot; the hlt loop is a last resort.
 * bench-start measures the time to that '!' against our VMM's payload-hello.
 */
#define XEN_ELFNOTE_PHYS32_ENTRY 18

	.code32
	.text
	.globl	pvh_start
	.type	pvh_start, @function
pvh_start:
	movw	$0x3f8, %dx		/* UART THR */
	movb	$'!', %al
	outb	%al, %dx
	movb	$0xfe, %al		/* i8042: pulse reset (ends the VM where there is one) */
	outb	%al, $0x64
	lidt	pvh_null_idt		/* no IDT: the next exception is a triple fault */
	ud2
1:	hlt
	jmp	1b
	.size	pvh_start, . - pvh_start

	.balign	8
pvh_null_idt:				/* IDTR operand: limit 0, base 0 */
	.word	0
	.long	0

	/* The PVH entry note: name "Xen", type 18, a 4-byte physical entry address. */
	.section .note.Xen, "a", @note
	.balign	4
	.long	2f - 1f			/* namesz */
	.long	4f - 3f			/* descsz */
	.long	XEN_ELFNOTE_PHYS32_ENTRY
1:	.asciz	"Xen"
2:	.balign	4
3:	.long	pvh_start
4:	.balign	4

	.section .note.GNU-stack, "", @progbits
