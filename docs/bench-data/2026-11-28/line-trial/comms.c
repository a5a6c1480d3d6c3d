#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* K dups of WORLD; R rounds; each round times N barriers on each comm (order rotates). prints per comm median ns */
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  int K=argc>1?atoi(argv[1]):6, R=argc>2?atoi(argv[2]):15, N=argc>3?atoi(argv[3]):10000;
  int rank; MPI_Comm_rank(MPI_COMM_WORLD,&rank);
  MPI_Comm c[16]; double t[16][64];
  for(int k=0;k<K;k++){ if(k==0) c[k]=MPI_COMM_WORLD; else MPI_Comm_dup(MPI_COMM_WORLD,&c[k]); for(int i=0;i<1000;i++) MPI_Barrier(c[k]); }
  for(int r=0;r<R;r++) for(int j=0;j<K;j++){ int k=(j+r)%K;
    MPI_Barrier(c[k]); double t0=MPI_Wtime(); for(int i=0;i<N;i++) MPI_Barrier(c[k]); t[k][r]=(MPI_Wtime()-t0)/N*1e9; }
  if(rank==0){ for(int k=0;k<K;k++){ qsort(t[k],R,sizeof(double),cmp); printf("%.1f ",t[k][R/2]);} printf("\n"); }
  MPI_Finalize(); return 0; }
