/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `sandbox-proxy guard` (docs/hardening.md "The proxy's jail"): the nftables script of the
 * kernel's guard on one jailed proxy's upstream connects, printed for sandboxctl to load with
 * `nft -f -` in the host's namespace before the proxy starts (and to remove after it stops).
 *
 *   sandbox-proxy guard DIR --uid N --uids LO-HI   the guard of uid N, from DIR/policy.yaml
 *   sandbox-proxy guard --remove --uid N           the script that removes it
 *
 * Here because the proxy owns the policy's parser: the guard lets through exactly the
 * policy's resolver and allow-cidr before the refusal of the special ranges
 * (netpolicy/guard.c writes it, from the table the proxy decides by). LO-HI is every proxy's
 * uid (sandboxctl's scheme, not the proxy's to know): one of them without a guard is refused
 * everything. Nothing here loads a rule or needs root. Exit 0, 2 on a bad command line or
 * policy, 1 on another error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* A uid as the command line gives it: decimal, 1 to 2^32-2. */
static int guard_parse_uid(const char *s, const char *end_at, uint32_t *out)
{
	unsigned long long v = 0;
	const char *p = s;

	for (; p != end_at && *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v >= UINT32_MAX)
			return -EINVAL;
	}
	if (p == s || p != end_at || v == 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int guard_usage(const char *why)
{
	fprintf(stderr,
		"sandbox-proxy: guard: %s\n"
		"usage: sandbox-proxy guard DIR --uid N --uids LO-HI\n"
		"       sandbox-proxy guard --remove --uid N\n",
		why);
	return PROXY_EXIT_USAGE;
}

static int guard_remove(uint32_t uid)
{
	char text[1024];

	if (netpol_guard_remove_text(uid, text, sizeof(text)) < 0)
		return PROXY_EXIT_ERR;
	if (fputs(text, stdout) == EOF || fflush(stdout) != 0) {
		fprintf(stderr, "sandbox-proxy: guard: stdout: %s\n", strerror(errno));
		return PROXY_EXIT_ERR;
	}
	return 0;
}

int guard_command(int argc, char **argv)
{
	const char *dir = NULL, *uid_s = NULL, *range = NULL, *dash;
	struct netpol_guard g = {0};
	struct policy *p = NULL;
	bool remove = false;
	char err[600] = "", path[4200];
	int rc = PROXY_EXIT_USAGE, e;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--remove") == 0)
			remove = true;
		else if (strcmp(argv[i], "--uid") == 0 && i + 1 < argc)
			uid_s = argv[++i];
		else if (strcmp(argv[i], "--uids") == 0 && i + 1 < argc)
			range = argv[++i];
		else if (argv[i][0] != '-' && !dir)
			dir = argv[i];
		else
			return guard_usage("unknown option or a missing value");
	}
	if (!uid_s || guard_parse_uid(uid_s, uid_s + strlen(uid_s), &g.uid) < 0)
		return guard_usage("--uid takes a uid (decimal, not 0)");
	if (remove)
		return dir || range ? guard_usage("--remove takes only --uid")
				    : guard_remove(g.uid);
	if (!dir)
		return guard_usage("DIR missing");
	dash = range ? strchr(range, '-') : NULL;
	if (!dash || guard_parse_uid(range, dash, &g.uid_lo) < 0 ||
	    guard_parse_uid(dash + 1, dash + 1 + strlen(dash + 1), &g.uid_hi) < 0 ||
	    g.uid_lo > g.uid_hi || g.uid < g.uid_lo || g.uid > g.uid_hi)
		return guard_usage("--uids takes LO-HI, a range of uids that holds --uid");
	p = policy_new();
	if (!p || snprintf(path, sizeof(path), "%s/policy.yaml", dir) >= (int)sizeof(path)) {
		snprintf(err, sizeof(err), "%.400s: %s", dir, strerror(p ? ENAMETOOLONG : ENOMEM));
		rc = PROXY_EXIT_ERR;
		goto out;
	}
	/* As `run` reads it (main_load): the same resolver and allow-cidr, or none. */
	if ((e = policy_load(p, path, err, sizeof(err))) < 0) {
		rc = e == -EINVAL ? PROXY_EXIT_USAGE : PROXY_EXIT_ERR;
		goto out;
	}
	g.resolver = p->resolver ? &p->resolver_sa : NULL;
	g.cidrs = p->cidrs;
	g.ncidrs = p->ncidrs;
	rc = PROXY_EXIT_ERR;
	if ((e = netpol_guard_write(stdout, &g)) < 0) {
		snprintf(err, sizeof(err), "%.400s: cannot write the guard: %s", path,
			 strerror(-e));
		goto out;
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "sandbox-proxy: guard: %s\n", err[0] ? err : "failed");
	policy_free(p);
	return rc;
}
