/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Can this host boot a sandbox? A sandbox is a Linux guest, and no Linux guest boots on
 * kvm-pvm: KVM emulates guest kernel code there, slowly, until an instruction it cannot
 * emulate ends the VM tens of seconds later (docs/hosts.md). create, start and run ask here
 * first and refuse at once, before any directory, disk or VMM exists, with what does work on
 * such a host. SANDBOX_SKIP_HOST_CHECK=1 lets someone whose guest kernel does boot there try.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <errno.h>

#include "client.h"
#include "kvm.h"

#define HOST_CHECK_ENV "SANDBOX_SKIP_HOST_CHECK"

static const char kvm_pvm_refusal[] =
	"this host's /dev/kvm is kvm-pvm, on which no Linux guest boots\n"
	"  (KVM emulates guest kernel code there and stops at an instruction it\n"
	"  cannot emulate, tens of seconds later; docs/hosts.md). What works here:\n"
	"  payload guests (sandbox-vmm --payload), and sandboxes inside the emulated\n"
	"  KVM host: tools/dev run JOB.yaml, or tools/devhost/run -- sandboxctl ...\n"
	"  To try anyway with a guest kernel that boots on kvm-pvm, set\n"
	"  " HOST_CHECK_ENV "=1";

static const char no_kvm_refusal[] =
	"this host has no usable /dev/kvm (no KVM module, a kvm-pvm module that did\n"
	"  not bind because this kernel is itself a kvm-pvm guest, or no read-write\n"
	"  access to it), so no sandbox boots here (docs/hosts.md). What works here:\n"
	"  sandboxes inside the emulated KVM host: tools/dev run JOB.yaml, or\n"
	"  tools/devhost/run -- sandboxctl ...; natively, a host with hardware\n"
	"  virtualisation (kvm_intel or kvm_amd). " HOST_CHECK_ENV "=1 tries anyway";

const char *host_refusal(int flavour, bool kvm_usable)
{
	/* No /dev/kvm first: a kvm_pvm module that did not bind leaves its name in /sys/module. */
	if (!kvm_usable)
		return no_kvm_refusal;
	if (flavour == KVM_PVM)
		return kvm_pvm_refusal;
	return NULL;
}

int sandbox_host_check(struct lc_report *r)
{
	const char *skip = getenv(HOST_CHECK_ENV), *why;

	if (skip && strcmp(skip, "1") == 0)
		return 0;
	why = host_refusal(kvm_detect_flavour("/sys/module"), access("/dev/kvm", R_OK | W_OK) == 0);
	if (!why)
		return 0;
	return lc_fail(r, -ESRCH, "%s", why);
}
