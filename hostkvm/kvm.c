/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which KVM is this? Hardware virtualisation (kvm_intel, kvm_amd) boots Linux guests; kvm-pvm
 * (Pagetable-based Virtual Machine) runs ring-3 guest code natively but emulates ring-0 code
 * and cannot boot a stock Linux kernel (docs/hosts.md); without /dev/kvm nothing runs.
 */
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

#include "kvm.h"

/* True when `dir`/`name` exists: a loaded (or built-in) kernel module. */
static bool kvm_module_present(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

enum kvm_flavour kvm_detect_flavour(const char *sys_module_dir)
{
	/* PVM first: a host may have kvm_pvm beside a hardware module that found no VT-x/SVM,
	 * and /dev/kvm then belongs to PVM. */
	if (kvm_module_present(sys_module_dir, "kvm_pvm"))
		return KVM_PVM;
	if (kvm_module_present(sys_module_dir, "kvm_intel"))
		return KVM_INTEL;
	if (kvm_module_present(sys_module_dir, "kvm_amd"))
		return KVM_AMD;
	if (kvm_module_present(sys_module_dir, "kvm"))
		return KVM_OTHER;
	return KVM_NONE;
}

const char *kvm_flavour_name(enum kvm_flavour f)
{
	switch (f) {
	case KVM_INTEL:
		return "kvm_intel";
	case KVM_AMD:
		return "kvm_amd";
	case KVM_PVM:
		return "kvm_pvm";
	case KVM_OTHER:
		return "kvm";
	case KVM_NONE:
		break;
	}
	return "none";
}

const char *kvm_flavour_verdict(enum kvm_flavour f)
{
	switch (f) {
	case KVM_INTEL:
	case KVM_AMD:
		return "hardware virtualisation: Linux guests and payload guests boot natively "
		       "here";
	case KVM_PVM:
		return "kvm-pvm: payload guests run natively, Linux guests cannot boot here "
		       "(use the emulated host, tools/devhost)";
	case KVM_OTHER:
		return "an unknown KVM: payload guests should run, Linux guests are untested here";
	case KVM_NONE:
		break;
	}
	return "no KVM: no guest can run here (load kvm_intel or kvm_amd, or use a machine "
	       "with /dev/kvm)";
}
