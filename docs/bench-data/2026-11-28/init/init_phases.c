#include <mpi.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int c, char**v){ double t0=now(); MPI_Init(&c,&v); double t1=now(); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
 double t2=now(); MPI_Finalize(); double t3=now();
 printf("r%d init=%.0f fin=%.0f\n", r, t1-t0, t3-t2); return 0;}
