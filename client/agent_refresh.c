/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every restored or forked VM needs from the host before a user command runs in it (see
 * agent_refresh in client.h): fresh randomness for its kernel (RESEED with bytes of the host's
 * getrandom) and the host's wall-clock time (SET_CLOCK), two calls through agent_call.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "proto.h"
#include "client.h"

/* Bytes of seed a refresh sends: 512 bits, twice what the kernel's CRNG needs to be ready. */
#define REFRESH_SEED_LEN 64u

/*
 * One call of `type` with `payload` on c that must end in OK, before deadline (now_ms()).
 * Returns 0, the -errno of the agent's ERROR, -ETIMEDOUT, -EPROTO for any other final frame,
 * or the -errno of the connection.
 */
static int agent_refresh_call(struct agent_conn *c, uint16_t type, const void *payload,
			      uint32_t len, uint64_t deadline)
{
	uint64_t now = now_ms(), left = deadline > now ? deadline - now : 0;
	struct proto_frame f;
	uint32_t e;
	int err;

	if (left == 0)
		return -ETIMEDOUT;
	err = agent_call(c, type, payload, len, left > INT_MAX ? INT_MAX : (int)left, NULL, NULL,
			 &f);
	if (err < 0)
		return err;
	if (f.hdr.type == PROTO_MSG_OK)
		return 0;
	if (f.hdr.type != PROTO_MSG_ERROR)
		return -EPROTO;
	/* the decoder checked that an ERROR holds a proto_error; its errno is the guest's word:
	 * one that is no errno (0 would read as success, 4096 and up
	 * are beyond Linux's MAX_ERRNO) is a protocol error */
	e = proto_get_le32(f.payload + offsetof(struct proto_error, err));
	return e > 0 && e < 4096 ? -(int)e : -EPROTO;
}

/* Reseed the guest's RNG and step its clock to the host's; see client.h. */
int agent_refresh(struct agent_conn *c, unsigned timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	uint8_t seed[REFRESH_SEED_LEN];
	uint8_t when[sizeof(struct proto_set_clock)] = {0};
	struct timespec ts;
	ssize_t n;
	int err;

	do {
		n = getrandom(seed, sizeof(seed), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(seed)) {
		err = n < 0 ? -errno : -EIO;
		goto out;
	}
	err = agent_refresh_call(c, PROTO_MSG_RESEED, seed, sizeof(seed), deadline);
	if (err < 0)
		goto out;
	/* read the time last, just before it is sent: the guest ends behind the host by the
	 * frame's trip alone */
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0) {
		err = -errno;
		goto out;
	}
	proto_put_le64(when + offsetof(struct proto_set_clock, sec), (uint64_t)ts.tv_sec);
	proto_put_le32(when + offsetof(struct proto_set_clock, nsec), (uint32_t)ts.tv_nsec);
	err = agent_refresh_call(c, PROTO_MSG_SET_CLOCK, when, sizeof(when), deadline);
out:
	explicit_bzero(seed, sizeof(seed));
	return err;
}
