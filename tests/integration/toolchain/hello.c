/* The C toolchain: the C library's headers, libm, a warning-free build. */
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	const char *who = argc > 1 ? argv[1] : "world";

	printf("c: hello %s, strlen=%zu sqrt2=%.4f\n", who, strlen(who), sqrt(2.0));
	return 0;
}
