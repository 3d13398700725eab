/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running sandbox's egress policy made anew, a lifecycle verb (sandboxd's warm pool: a
 * sandbox restored ahead of time gets its owner's proxy_config when it is claimed). Its proxy
 * stopped, the policy, credentials and CA prepared from `o` as a create does, the proxy started
 * again (its kernel guard with it), and the new CA put in the guest, so nothing of the pool's
 * default policy is left in force.
 */
#include <errno.h>

#include "client.h"

int sandbox_net_reconfigure(const struct sandbox *sb, const struct create_opts *o,
			    struct lc_report *r)
{
	int err;

	if (!sb->network)
		return lc_bad_option(r, "%s has no network: its policy cannot change", sb->id);
	proxy_stop(sb);
	if ((err = sandbox_net_prepare(sb, o, r)) < 0)
		return err;
	if ((err = proxy_start(sb)) < 0)
		return lc_fail(r, err, "%s: its proxy does not start again", sb->id);
	return sandbox_install_ca(sb, r);
}
