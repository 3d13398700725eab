/* SPDX-License-Identifier: Apache-2.0 */
/* hostkvm/kvm.c: telling the host's KVM flavour from a /sys/module-like directory tree. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "vmm.h"

static const char *const modules[] = {"kvm", "kvm_intel", "kvm_amd", "kvm_pvm", "kvmgt"};
#define NMODULES   (sizeof(modules) / sizeof(modules[0]))
#define DIR_MAX	   256
#define PATH_MAX_T (DIR_MAX + 32)

/* A fresh temporary directory holding a subdirectory per name in `names` (NULL-terminated). */
static void make_tree(char dir[static DIR_MAX], const char *const *names)
{
	const char *tmp = getenv("TMPDIR");
	char path[PATH_MAX_T];

	if (!tmp || !*tmp)
		tmp = "/tmp";
	cr_assert(lt(int, snprintf(dir, DIR_MAX, "%s/sandbox-test-kvm-XXXXXX", tmp), DIR_MAX));
	cr_assert(mkdtemp(dir) != NULL, "mkdtemp in %s", tmp);
	for (; *names; names++) {
		snprintf(path, sizeof(path), "%s/%s", dir, *names);
		cr_assert(eq(int, mkdir(path, 0755), 0), "mkdir %s", path);
	}
}

static void remove_tree(const char *dir)
{
	char path[PATH_MAX_T];

	for (size_t i = 0; i < NMODULES; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, modules[i]);
		if (rmdir(path) != 0)
			unlink(path);
	}
	cr_assert(eq(int, rmdir(dir), 0), "rmdir %s", dir);
}

static enum kvm_flavour detect(const char *const *names)
{
	char dir[DIR_MAX];
	enum kvm_flavour f;

	make_tree(dir, names);
	f = kvm_detect_flavour(dir);
	remove_tree(dir);
	return f;
}

Test(kvm_flavour, pvm)
{
	cr_assert(eq(int, detect((const char *const[]){"kvm", "kvm_pvm", NULL}), KVM_PVM));
}

Test(kvm_flavour, pvm_wins_over_a_hardware_module)
{
	/* kvm_intel loaded but found no VT-x: /dev/kvm belongs to PVM. */
	cr_assert(eq(int, detect((const char *const[]){"kvm", "kvm_intel", "kvm_pvm", NULL}),
		     KVM_PVM));
	cr_assert(
		eq(int, detect((const char *const[]){"kvm", "kvm_amd", "kvm_pvm", NULL}), KVM_PVM));
}

Test(kvm_flavour, intel)
{
	cr_assert(eq(int, detect((const char *const[]){"kvm", "kvm_intel", NULL}), KVM_INTEL));
}

Test(kvm_flavour, amd)
{
	cr_assert(eq(int, detect((const char *const[]){"kvm", "kvm_amd", NULL}), KVM_AMD));
}

Test(kvm_flavour, other)
{
	cr_assert(eq(int, detect((const char *const[]){"kvm", NULL}), KVM_OTHER));
	/* A module whose name merely starts with "kvm" is not a flavour. */
	cr_assert(eq(int, detect((const char *const[]){"kvm", "kvmgt", NULL}), KVM_OTHER));
}

Test(kvm_flavour, none)
{
	cr_assert(eq(int, detect((const char *const[]){NULL}), KVM_NONE));
	cr_assert(eq(int, kvm_detect_flavour("/nonexistent/sandbox-test/module"), KVM_NONE));
}

/* A module is a directory: a file of that name (or anything else) does not count. */
Test(kvm_flavour, files_are_not_modules)
{
	char dir[DIR_MAX], path[PATH_MAX_T];
	int fd;

	make_tree(dir, (const char *const[]){"kvm", NULL});
	snprintf(path, sizeof(path), "%s/kvm_pvm", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);
	cr_assert(ge(int, fd, 0));
	close(fd);
	cr_assert(eq(int, kvm_detect_flavour(dir), KVM_OTHER));
	remove_tree(dir);
}

Test(kvm_flavour, names)
{
	cr_assert(eq(str, (char *)kvm_flavour_name(KVM_INTEL), "kvm_intel"));
	cr_assert(eq(str, (char *)kvm_flavour_name(KVM_AMD), "kvm_amd"));
	cr_assert(eq(str, (char *)kvm_flavour_name(KVM_PVM), "kvm_pvm"));
	cr_assert(eq(str, (char *)kvm_flavour_name(KVM_OTHER), "kvm"));
	cr_assert(eq(str, (char *)kvm_flavour_name(KVM_NONE), "none"));
	cr_assert(eq(str, (char *)kvm_flavour_name((enum kvm_flavour)42), "none"));
}

Test(kvm_flavour, verdicts)
{
	const char *v;

	v = kvm_flavour_verdict(KVM_PVM);
	cr_assert(strstr(v, "cannot boot") != NULL, "PVM verdict: %s", v);
	cr_assert(strstr(v, "payload") != NULL, "PVM verdict: %s", v);
	v = kvm_flavour_verdict(KVM_INTEL);
	cr_assert(strstr(v, "cannot") == NULL, "Intel verdict: %s", v);
	cr_assert(strstr(v, "Linux") != NULL, "Intel verdict: %s", v);
	cr_assert(eq(str, (char *)kvm_flavour_verdict(KVM_AMD), (char *)v));
	v = kvm_flavour_verdict(KVM_NONE);
	cr_assert(strstr(v, "no KVM") != NULL, "no-KVM verdict: %s", v);
	v = kvm_flavour_verdict(KVM_OTHER);
	cr_assert(strstr(v, "cannot boot") == NULL, "other verdict: %s", v);
	for (int f = KVM_NONE; f <= KVM_OTHER; f++)
		cr_assert(gt(sz, strlen(kvm_flavour_verdict((enum kvm_flavour)f)), 20));
}
