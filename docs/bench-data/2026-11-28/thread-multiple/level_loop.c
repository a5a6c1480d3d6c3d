#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  int want = (argc>1 && !strcmp(argv[1],"multiple")) ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got, r;
  int iters = argc>2?atoi(argv[2]):200000;
  MPI_Init_thread(&argc,&argv,want,&got);
  MPI_Comm_rank(MPI_COMM_WORLD,&r);
  double t[15];
  for(int i=0;i<1000;i++) MPI_Barrier(MPI_COMM_WORLD);
  for(int k=0;k<15;k++){MPI_Barrier(MPI_COMM_WORLD);double t0=MPI_Wtime();for(int i=0;i<iters;i++)MPI_Barrier(MPI_COMM_WORLD);t[k]=(MPI_Wtime()-t0)*1e9/iters;}
  qsort(t,15,sizeof(double),cmp);
  if(!r) printf("level=%s got=%d median_ns=%.1f min_ns=%.1f\n",argv[1],got,t[7],t[0]);
  MPI_Finalize();
}
