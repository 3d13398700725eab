/* The benchmark project's hash: FNV-1a over the bytes, then the dependency's chain. */
#ifndef HASH_H
#define HASH_H
#include <stddef.h>
unsigned long hash_bytes(const void *data, size_t len);
#endif
