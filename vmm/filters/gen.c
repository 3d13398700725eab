/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp-gen: compile the VMM's filters (rules.c) to BPF at build time, so that a VMM's start
 * only hands the kernel a finished program (docs/hardening.md, "What the jail costs").
 *
 *   seccomp-gen OUTPUT.h
 *
 * OUTPUT.h defines, for each filter kind, its instructions (seccomp_bpf_<kind>[]) and, for
 * the vCPU filter, where it names FILTER_VCPU_SELF (seccomp_bpf_vcpu_self[]): the index of
 * every instruction whose operand seccomp.c replaces by the thread's own fd. Each of those is
 * checked here to be an equality jump (BPF_JMP | BPF_JEQ | BPF_K), the only place where a
 * changed operand changes nothing but the value compared, and the stand-in must appear
 * nowhere else. The filters kill the process on anything else (a foreign architecture too)
 * and are laid out as a binary tree of syscall numbers (libseccomp's optimize level 2).
 */
#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filters.h"

static const char *const kind_name[FILTER_KINDS] = {"base", "io", "vcpu", "restore"};

static void die(const char *what, int err)
{
	fprintf(stderr, "seccomp-gen: %s: %s\n", what, strerror(err));
	exit(1);
}

/* `kind`'s program, malloc'd; its length in *n. */
static struct sock_filter *compile(enum filter_kind kind, size_t *n)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	struct sock_filter *prog;
	struct stat st;
	int fd, err;

	if (!ctx)
		die("seccomp_init", ENOMEM);
	/* The rules' syscall numbers and ioctls are x86_64's; so is the VMM. */
	if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
		fprintf(stderr, "seccomp-gen: this build machine is not x86_64: the VMM's filters "
				"are made for x86_64 only\n");
		exit(1);
	}
	if ((err = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		die("seccomp_attr_set", -err);
	if ((err = filter_rules(ctx, kind)) < 0)
		die(kind_name[kind], -err);
	/* libseccomp (2.5) exports only to an fd. */
	if ((fd = memfd_create("filter", MFD_CLOEXEC)) < 0)
		die("memfd_create", errno);
	if ((err = seccomp_export_bpf(ctx, fd)) < 0)
		die("seccomp_export_bpf", -err);
	seccomp_release(ctx);
	if (fstat(fd, &st) < 0)
		die("fstat", errno);
	if (st.st_size <= 0 || st.st_size % sizeof(*prog) ||
	    st.st_size / sizeof(*prog) > BPF_MAXINSNS)
		die(kind_name[kind], E2BIG);
	if (!(prog = malloc((size_t)st.st_size)))
		die("malloc", ENOMEM);
	if (pread(fd, prog, (size_t)st.st_size, 0) != st.st_size)
		die("pread", EIO);
	close(fd);
	*n = (size_t)st.st_size / sizeof(*prog);
	return prog;
}

static void emit(FILE *out, enum filter_kind kind)
{
	size_t n, self = 0;
	struct sock_filter *prog = compile(kind, &n);

	fprintf(out, "static const struct sock_filter seccomp_bpf_%s[%zu] = {\n", kind_name[kind],
		n);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "\t{0x%04x, %u, %u, 0x%08x},\n", prog[i].code, prog[i].jt, prog[i].jf,
			prog[i].k);
	fprintf(out, "};\n");
	for (size_t i = 0; i < n; i++)
		if (prog[i].k == FILTER_VCPU_SELF) {
			if (kind != FILTER_VCPU || prog[i].code != (BPF_JMP | BPF_JEQ | BPF_K)) {
				fprintf(stderr,
					"seccomp-gen: the %s filter's instruction %zu (code 0x%x) "
					"holds FILTER_VCPU_SELF\n",
					kind_name[kind], i, prog[i].code);
				exit(1);
			}
			self++;
		}
	if (kind == FILTER_VCPU) {
		if (!self) {
			fprintf(stderr, "seccomp-gen: the vcpu filter never names its own fd\n");
			exit(1);
		}
		fprintf(out, "static const unsigned short seccomp_bpf_vcpu_self[%zu] = {", self);
		for (size_t i = 0, k = 0; i < n; i++)
			if (prog[i].k == FILTER_VCPU_SELF)
				fprintf(out, "%s%zu", k++ ? ", " : "", i);
		fprintf(out, "};\n");
	}
	free(prog);
}

int main(int argc, char **argv)
{
	FILE *out;

	if (argc != 2) {
		fprintf(stderr, "usage: seccomp-gen OUTPUT.h\n");
		return 2;
	}
	if (!(out = fopen(argv[1], "w")))
		die(argv[1], errno);
	fprintf(out, "/* Made by seccomp-gen (vmm/filters/gen.c) from vmm/filters/rules.c. */\n"
		     "#include <linux/filter.h>\n");
	for (enum filter_kind k = 0; k < FILTER_KINDS; k++)
		emit(out, k);
	if (fclose(out) != 0)
		die(argv[1], errno);
	return 0;
}
