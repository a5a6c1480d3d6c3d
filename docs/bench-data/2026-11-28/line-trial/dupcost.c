#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* N times: MPI_Comm_dup, first MPI_Barrier on it, MPI_Comm_free; µs per iteration (rank 0). */
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int N=argc>1?atoi(argv[1]):200, rank; MPI_Comm_rank(MPI_COMM_WORLD,&rank);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0=MPI_Wtime();
  for(int i=0;i<N;i++){ MPI_Comm c; MPI_Comm_dup(MPI_COMM_WORLD,&c); MPI_Barrier(c); MPI_Comm_free(&c); }
  double t=(MPI_Wtime()-t0)/N*1e6;
  if(rank==0) printf("dup_first_barrier_free_us=%.1f\n",t);
  MPI_Finalize(); return 0; }
