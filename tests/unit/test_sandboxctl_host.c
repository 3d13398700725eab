/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools/sandboxctl/host.c: which hosts sandboxctl refuses to boot a sandbox on, for every KVM
 * flavour, so the decision is tested whatever KVM the test machine has.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "client.h"
#include "kvm.h"

Test(host, hardware_kvm_boots)
{
	cr_assert(eq(ptr, (void *)host_refusal(KVM_INTEL, true), NULL));
	cr_assert(eq(ptr, (void *)host_refusal(KVM_AMD, true), NULL));
}

/* An unknown KVM may boot Linux: the VMM is left to try. */
Test(host, unknown_kvm_is_tried)
{
	cr_assert(eq(ptr, (void *)host_refusal(KVM_OTHER, true), NULL));
}

Test(host, pvm_is_refused_with_what_works)
{
	const char *why = host_refusal(KVM_PVM, true);

	cr_assert(why != NULL);
	cr_assert(strstr(why, "kvm-pvm") != NULL, "%s", why);
	cr_assert(strstr(why, "payload guests") != NULL, "%s", why);
	cr_assert(strstr(why, "tools/dev run") != NULL, "%s", why);
	cr_assert(strstr(why, "SANDBOX_SKIP_HOST_CHECK=1") != NULL, "%s", why);
}

Test(host, no_usable_kvm_is_refused)
{
	for (int f = KVM_NONE; f <= KVM_OTHER; f++) {
		const char *why = host_refusal(f, false);

		cr_assert(why != NULL, "flavour %d", f);
		cr_assert(strstr(why, "no usable /dev/kvm") != NULL, "%s", why);
		cr_assert(strstr(why, "tools/dev run") != NULL, "%s", why);
	}
}

Test(host, the_override_skips_the_check)
{
	struct lc_report r = {.note = NULL};
	const char *why;

	setenv("SANDBOX_SKIP_HOST_CHECK", "1", 1);
	cr_assert(eq(int, sandbox_host_check(&r), 0));
	/* Anything but "1" is no override; a refusal is -ESRCH (an unusable sandbox), saying
	 * why. */
	setenv("SANDBOX_SKIP_HOST_CHECK", "yes", 1);
	why = host_refusal(kvm_detect_flavour("/sys/module"), access("/dev/kvm", R_OK | W_OK) == 0);
	if (why) {
		cr_assert(eq(int, sandbox_host_check(&r), -ESRCH));
		cr_assert(eq(str, r.error, (char *)why));
	}
	unsetenv("SANDBOX_SKIP_HOST_CHECK");
}
