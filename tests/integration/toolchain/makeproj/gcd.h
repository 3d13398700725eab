/* A header of the project's own, found by -I. */
#ifndef GCD_H
#define GCD_H
unsigned gcd(unsigned a, unsigned b);
#endif
