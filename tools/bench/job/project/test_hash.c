/* The project's tests: the hash is a function of its input, and inputs apart hash apart. */
#include <stdio.h>
#include <string.h>

#include "dep.h"
#include "hash.h"

static int failed;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	failed |= !ok;
}

int main(void)
{
	char a[64], b[64];
	unsigned long seen[256];

	expect(dep_steps() > 0, "the dependency has steps");
	expect(hash_bytes("abc", 3) == hash_bytes("abc", 3), "the same input, the same hash");
	expect(hash_bytes("abc", 3) != hash_bytes("abd", 3), "one byte apart, two hashes");
	for (int i = 0; i < 256; i++) {
		unsigned char c = (unsigned char)i;

		seen[i] = hash_bytes(&c, 1);
		for (int j = 0; j < i; j++)
			if (seen[j] == seen[i])
				expect(0, "256 one-byte inputs, 256 hashes");
	}
	memset(a, 'x', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[63] = 'y';
	expect(hash_bytes(a, sizeof(a)) != hash_bytes(b, sizeof(b)), "the last byte counts");
	printf("%s\n", failed ? "tests failed" : "all tests passed");
	return failed;
}
