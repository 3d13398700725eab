/* SPDX-License-Identifier: Apache-2.0 */
/* What the fleet's files share and nobody else needs. */
#ifndef SANDBOX_FLEET_INT_H
#define SANDBOX_FLEET_INT_H

#include <nats/nats.h>

#include "fleet.h"

int fleet_fail(struct fleet *f, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint64_t fleet_now_ms(void);
#define MS_NS 1000000ll /* nanoseconds, JetStream's unit of time */
/* The core NATS subject that tells host a create waits in its own queue:
 * sandbox.poke.<pool>.<host>. */
void fleet_poke_subject(const struct fleet *f, const char *host, char *out, size_t len);
/* A call the cluster did not answer (no responders, a timeout: a stream's or bucket's leader
 * being elected after a node's loss, seconds; more on a loaded machine) is made again, a
 * pause apart, for up to this long. */
#define FLEET_RETRY_MS 15000
/* fleet_alive, and the revision of the host's liveness entry (it changes at each beat). */
int fleet_alive_rev(struct fleet *f, const char *host, uint64_t *rev);
/* The bucket `name` (made if it does not exist; ttl_ms 0: values do not expire; a message at
 * most max_msg bytes, headers included), its reads from its stream's leader: *kv a kvStore. */
natsStatus fleet_bucket(struct fleet *f, const char *name, int64_t ttl_ms, int32_t max_msg,
			void **kv);
/* place.c: the subscription to hosts' answers (made at open), and its end. */
int fleet_replies_open(struct fleet *f);
void fleet_replies_close(struct fleet *f);

#endif
