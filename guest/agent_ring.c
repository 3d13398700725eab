/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A command session's stored output (see agent.h, docs/agent-protocol.md "Command sessions"):
 * the UTF-8 sanitiser that makes what a program wrote valid UTF-8 before it is stored, and the
 * ring that keeps the last AGENT_SESSION_RING bytes of a stream at absolute offsets. Pure
 * functions on memory: no fds, no frames (agent_session.c does those).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Write U+FFFD at out; returns 3. */
static size_t agent_utf8_replacement(uint8_t *out)
{
	out[0] = 0xef;
	out[1] = 0xbf;
	out[2] = 0xbd;
	return 3;
}

/* Make n bytes valid UTF-8; see agent.h. */
size_t agent_utf8_sanitize(const uint8_t *in, size_t n, bool eof, uint8_t *out, uint8_t tail[4],
			   uint8_t *tail_len)
{
	size_t i = 0, o = 0;

	*tail_len = 0;
	while (i < n) {
		uint8_t b = in[i], lo = 0x80, hi = 0xbf;
		size_t need, j;

		if (b < 0x80) {
			out[o++] = b;
			i++;
			continue;
		}
		/* the lead bytes of the well-formed sequences (Unicode table 3-7) */
		if (b >= 0xc2 && b <= 0xdf) {
			need = 1;
		} else if (b >= 0xe0 && b <= 0xef) {
			need = 2;
			lo = b == 0xe0 ? 0xa0 : 0x80;
			hi = b == 0xed ? 0x9f : 0xbf;
		} else if (b >= 0xf0 && b <= 0xf4) {
			need = 3;
			lo = b == 0xf0 ? 0x90 : 0x80;
			hi = b == 0xf4 ? 0x8f : 0xbf;
		} else {
			o += agent_utf8_replacement(out + o);
			i++;
			continue;
		}
		for (j = 1; j <= need && i + j < n; j++) {
			uint8_t cb = in[i + j];

			if (j == 1 ? cb < lo || cb > hi : cb < 0x80 || cb > 0xbf)
				break;
		}
		if (j > need) {
			memcpy(out + o, in + i, need + 1);
			o += need + 1;
			i += need + 1;
			continue;
		}
		if (i + j == n && !eof) {
			/* cut by the end of what was read: the rest may come */
			memcpy(tail, in + i, n - i);
			*tail_len = (uint8_t)(n - i);
			break;
		}
		o += agent_utf8_replacement(out + o);
		i += j;
	}
	return o;
}

/* Whether b continues a character; see agent.h. */
bool agent_utf8_cont(uint8_t b)
{
	return (b & 0xc0) == 0x80;
}

/* The oldest offset held; see agent.h. */
uint64_t agent_ring_start(const struct agent_ring *st)
{
	return st->end > AGENT_SESSION_RING ? st->end - AGENT_SESSION_RING : 0;
}

/* The byte at a held offset; see agent.h. */
uint8_t agent_ring_at(const struct agent_ring *st, uint64_t off)
{
	return st->data[off % AGENT_SESSION_RING];
}

/* Store bytes at the end; see agent.h. */
int agent_ring_append(struct agent_ring *st, const uint8_t *data, size_t n)
{
	uint64_t need = st->end + n < AGENT_SESSION_RING ? st->end + n : AGENT_SESSION_RING;
	size_t idx, first;

	if (st->cap < need) {
		/* while it grows, end + n <= cap < RING: offsets map to the ring without wrap */
		size_t cap = st->cap ? st->cap : 4096;
		uint8_t *grown;

		while (cap < need)
			cap *= 2;
		if (cap > AGENT_SESSION_RING)
			cap = AGENT_SESSION_RING;
		grown = realloc(st->data, cap);
		if (grown == NULL)
			return -ENOMEM;
		st->data = grown;
		st->cap = cap;
	}
	idx = (size_t)(st->end % AGENT_SESSION_RING);
	first = n < AGENT_SESSION_RING - idx ? n : AGENT_SESSION_RING - idx;
	memcpy(st->data + idx, data, first);
	memcpy(st->data, data + first, n - first);
	st->end += n;
	return 0;
}

/* Copy held bytes out; see agent.h. */
void agent_ring_copy(const struct agent_ring *st, uint64_t off, size_t len, uint8_t *out)
{
	size_t idx = (size_t)(off % AGENT_SESSION_RING);
	size_t first = len < AGENT_SESSION_RING - idx ? len : AGENT_SESSION_RING - idx;

	memcpy(out, st->data + idx, first);
	memcpy(out + first, st->data, len - first);
}

/* Free the ring's memory; see agent.h. */
void agent_ring_free(struct agent_ring *st)
{
	free(st->data);
	memset(st, 0, sizeof(*st));
}
