/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vsock soak's protocol, defined once for both sides: payload-soak (tests/guests/soak.c)
 * and its host driver (tools/bench/vsock_soak.c). Freestanding: stdint only, every function
 * static inline, so the guest and the host compute the same pattern and the same checksum.
 *
 * A host client connects to guest port SOAK_PORT and sends command lines (at most
 * SOAK_LINE_MAX bytes with the newline; decimal counts, hex seeds without "0x"). Each is
 * answered by one line once its data has passed:
 *   SEND <n> <seed>  the guest streams n bytes of soak_pattern(seed), then
 *                    "SENT <n> <sum>" (the checksum of what it sent)
 *   RECV <n>         the host streams n bytes (any), the guest answers "RECVD <n> <sum>"
 *   ECHO <n>         the host streams n bytes, the guest sends each back as it comes, then
 *                    "ECHOED <n> <sum>" (the checksum of what it received)
 *   otherwise        "ERROR <why>"
 * <sum> is soak_sum's 16 lower-case hex digits. Commands on one connection run one after
 * the other; a client sends its next command after the last answer. n is at most SOAK_N_MAX.
 */
#ifndef SANDBOX_GUESTS_SOAK_WIRE_H
#define SANDBOX_GUESTS_SOAK_WIRE_H

#include <stdint.h>

#define SOAK_PORT     5000u
#define SOAK_LINE_MAX 64u
#define SOAK_N_MAX    (1ull << 40)

#define SOAK_FNV_OFFSET 0xcbf29ce484222325ull
#define SOAK_FNV_PRIME	0x100000001b3ull

/*
 * The checksum of a byte stream, fed in pieces of any length: FNV-1a over its 64-bit
 * little-endian words (the last one zero-padded), then the length. A word at a time, so
 * that the guest keeps up with the stream; the pieces' boundaries do not change the result.
 */
struct soak_sum {
	uint64_t h;
	uint64_t len;
	uint64_t tail;	   /* the bytes of a word not complete yet */
	uint32_t tail_len; /* 0..7 */
};

static inline void soak_sum_init(struct soak_sum *s)
{
	s->h = SOAK_FNV_OFFSET;
	s->len = 0;
	s->tail = 0;
	s->tail_len = 0;
}

static inline void soak_sum_update(struct soak_sum *s, const uint8_t *p, uint64_t len)
{
	uint64_t h = s->h;

	s->len += len;
	while (len && s->tail_len) {
		s->tail |= (uint64_t)*p++ << (8 * s->tail_len);
		len--;
		if (++s->tail_len == 8) {
			h = (h ^ s->tail) * SOAK_FNV_PRIME;
			s->tail = 0;
			s->tail_len = 0;
		}
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t w;

		__builtin_memcpy(&w, p, 8); /* an unaligned load; x86 is little-endian */
		h = (h ^ w) * SOAK_FNV_PRIME;
	}
	for (; len; len--)
		s->tail |= (uint64_t)*p++ << (8 * s->tail_len++);
	s->h = h;
}

/* The checksum of everything fed so far (s itself is left as it is). */
static inline uint64_t soak_sum_final(const struct soak_sum *s)
{
	uint64_t h = s->h;

	if (s->tail_len)
		h = (h ^ s->tail) * SOAK_FNV_PRIME;
	return (h ^ s->len) * SOAK_FNV_PRIME;
}

/* Word k of the pattern for seed (splitmix64 of seed + k). */
static inline uint64_t soak_pattern_word(uint64_t seed, uint64_t k)
{
	uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Writes bytes [off, off + len) of the pattern for seed into buf: byte i is byte i % 8 of
 * word i / 8, little-endian. */
static inline void soak_pattern(uint64_t seed, uint64_t off, uint8_t *buf, uint64_t len)
{
	while (len && (off & 7)) {
		*buf++ = (uint8_t)(soak_pattern_word(seed, off >> 3) >> (8 * (off & 7)));
		off++;
		len--;
	}
	for (; len >= 8; buf += 8, off += 8, len -= 8) {
		uint64_t w = soak_pattern_word(seed, off >> 3);

		__builtin_memcpy(buf, &w, 8);
	}
	for (uint64_t w = soak_pattern_word(seed, off >> 3); len; len--, off++)
		*buf++ = (uint8_t)(w >> (8 * (off & 7)));
}

#endif
