/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which KVM this host has (kvm.c). Self-contained: sandboxctl asks it too, before it starts a
 * VMM (tools/sandboxctl/host.c), without the rest of the VMM.
 */
#ifndef SANDBOX_KVM_H
#define SANDBOX_KVM_H

enum kvm_flavour { KVM_NONE, KVM_INTEL, KVM_AMD, KVM_PVM, KVM_OTHER };
/* Which KVM module this host has, from `sys_module_dir` (normally /sys/module). */
enum kvm_flavour kvm_detect_flavour(const char *sys_module_dir);
const char *kvm_flavour_name(enum kvm_flavour f);
/* One sentence on what runs on this flavour. */
const char *kvm_flavour_verdict(enum kvm_flavour f);

#endif
