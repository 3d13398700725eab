/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest's network as sandbox-init sets it up: lo always; eth0 only when the command line
 * has sandbox.net (address, prefix, default route via the gateway, the gateway as the
 * resolver in /etc/resolv.conf). docs/network.md has the addresses the host side uses.
 */
#ifndef SANDBOX_GUEST_NET_H
#define SANDBOX_GUEST_NET_H

#include "cmdline.h"

/* The interface sandbox.net configures. */
#define NET_IFNAME	"eth0"
#define NET_RESOLV_PATH "/etc/resolv.conf"

/*
 * Bring lo up, then configure NET_IFNAME from opts when opts->net is set (waiting up to a
 * second for the interface to appear) and write NET_RESOLV_PATH, unless /etc is read-only
 * (logged and skipped). Logs its own failures; returns 0, or the first -errno of the eth0
 * set-up (lo failing is only logged).
 */
int net_setup(const struct cmdline_options *opts) __attribute__((warn_unused_result));

#endif
