/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM's seccomp filters as rules (rules.c), compiled to BPF at build time by seccomp-gen
 * (gen.c) into seccomp_bpf.h, which vmm/seccomp.c loads (docs/hardening.md). Only the build
 * runs libseccomp on these rules: a VMM's start does not.
 *
 * The fds the rules name sit at fixed numbers (JAIL_FD_*, vmm.h: vm_place_fds puts them
 * there before the jail), at and above the jail's RLIMIT_NOFILE, where no fd the jailed VMM
 * opens or receives can land. One number is not known at build time, a vCPU thread's own fd:
 * its filter names FILTER_VCPU_SELF instead, and seccomp.c writes the fd over it.
 */
#ifndef SANDBOX_FILTERS_H
#define SANDBOX_FILTERS_H

#include <seccomp.h>

/* FILTER_RESTORE is the base plus what applying a snapshot's state takes (its KVM_SET_*
 * ioctls): the first filter of a VMM that restores, narrowed by the base once it is done. */
enum filter_kind { FILTER_BASE, FILTER_IO, FILTER_VCPU, FILTER_RESTORE, FILTER_KINDS };

/* The stand-in for a vCPU thread's own fd: no fd, syscall number or flag has this value,
 * and seccomp-gen checks it appears only as the operand of equality jumps. */
#define FILTER_VCPU_SELF 0x5ecc0fd1u

/* Add `kind`'s rules to `ctx`. 0 or a libseccomp -errno. */
int filter_rules(scmp_filter_ctx ctx, enum filter_kind kind);

#endif
