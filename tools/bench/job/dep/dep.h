/* The benchmark job's dependency: a chain of generated steps (gen.sh). */
#ifndef DEP_H
#define DEP_H
unsigned long dep_chain(unsigned long x);
unsigned dep_steps(void);
#endif
