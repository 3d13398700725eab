/* hashsum: the hash of stdin. */
#include <stdio.h>
#include <stdlib.h>

#include "hash.h"

int main(void)
{
	static unsigned char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), stdin);

	printf("%016lx\n", hash_bytes(buf, n));
	return 0;
}
