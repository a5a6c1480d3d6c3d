#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* dup+free only; dup+barrier+free; dup + 2 barriers + free: µs per iteration (rank 0). */
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int N=argc>1?atoi(argv[1]):200, rank; MPI_Comm_rank(MPI_COMM_WORLD,&rank);
  for (int mode=0; mode<3; mode++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0=MPI_Wtime();
    for(int i=0;i<N;i++){ MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD,&c); for (int k=0;k<mode;k++) MPI_Barrier(c); MPI_Comm_free(&c); }
    double t=(MPI_Wtime()-t0)/N*1e6;
    if(rank==0) printf("barriers=%d us=%.1f  ",mode,t);
  }
  if(rank==0) printf("\n");
  MPI_Finalize(); return 0; }
