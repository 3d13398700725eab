/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Payload entry, the same on every vCPU (wire/payload_abi.h): 64-bit ring 3, rdi = vCPU index,
 * rsi = number of vCPUs, rdx = &struct payload_info, rsp = top of this vCPU's stack. Those are
 * already payload_main()'s three arguments in the SysV order, so the entry only makes the
 * stack what the ABI of a C call expects and powers off if payload_main() returns.
 */
	.text
	.globl	_start
	.type	_start, @function
_start:
	cld				/* string instructions count up (the C ABI assumes DF = 0) */
	xorl	%ebp, %ebp		/* ends the frame chain for a debugger */
	andq	$-16, %rsp		/* 16-byte aligned at the call, as the SysV ABI requires */
	call	payload_main
	call	poweroff
1:	pause				/* not reached: poweroff() does not return */
	jmp	1b
	.size	_start, . - _start

	/* No executable stack wanted (and none exists): keeps ld from warning about it. */
	.section .note.GNU-stack, "", @progbits
