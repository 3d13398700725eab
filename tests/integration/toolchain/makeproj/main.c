#include <stdio.h>

#include "gcd.h"

int main(void)
{
	printf("make: gcd(84, 36) = %u\n", gcd(84, 36));
	return 0;
}
