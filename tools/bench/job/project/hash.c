#include "hash.h"
#include "dep.h"

unsigned long hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	unsigned long h = 0xcbf29ce484222325ul;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ul;
	return dep_chain(h);
}
