/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host's liveness (fleet.h): its key in the hosts bucket, put at every beat; the bucket's
 * values expire, so a host that stops beating lapses by itself.
 */
#include <errno.h>
#include <string.h>

#include <nats/nats.h>

#include "fleet.h"
#include "fleet_int.h"

int fleet_beat(struct fleet *f, const char *info)
{
	uint64_t rev = 0;
	natsStatus s;

	if (!f->conf.host[0])
		return fleet_fail(f, -EINVAL, "fleet: not a host");
	/* no responders: the bucket's leader is being elected; asked again for up to 2 s */
	for (int i = 0; i < 40; i++) {
		s = kvStore_Put(&rev, (kvStore *)f->hosts, f->conf.host, info, (int)strlen(info));
		if (s != NATS_NO_RESPONDERS)
			break;
		nats_Sleep(50);
	}
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: liveness of %s: %s", f->conf.host,
				  natsStatus_GetText(s));
	return 0;
}

int fleet_alive(struct fleet *f, const char *host)
{
	return fleet_alive_rev(f, host, NULL);
}

int fleet_alive_rev(struct fleet *f, const char *host, uint64_t *rev)
{
	kvEntry *e = NULL;
	natsStatus s;

	if (!fleet_id_ok(host))
		return 0;
	s = kvStore_Get(&e, (kvStore *)f->hosts, host);
	if (s == NATS_OK && rev)
		*rev = kvEntry_Revision(e);
	kvEntry_Destroy(e);
	if (s == NATS_NOT_FOUND)
		return 0;
	if (s != NATS_OK)
		return fleet_fail(f, -EIO, "fleet: liveness of %s: %s", host,
				  natsStatus_GetText(s));
	return 1;
}
