/* nap <mode> <us>: two processes start on CPU 0 with CPUs 0 and 1 allowed (pinned, then
 * unpinned: they stay on CPU 0 until the kernel moves them) and loop, each saying when it first
 * runs on another CPU than the one it started on (or that it did not within 200 ms).
 * mode 1: each loop turn yields (sched_yield), as hwbarr's waiters on a core found shared do;
 * mode 2: as 1, and after 1,000 turns each sleeps <us> once and says where it woke;
 * mode 3: no yield, a spin loop, as a spinning barrier's waiters do.
 * Build: gcc -O2 nap.c -o nap */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdlib.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); long us=atol(argv[2]);
  cpu_set_t one,all; CPU_ZERO(&one);CPU_SET(0,&one);CPU_ZERO(&all);CPU_SET(0,&all);CPU_SET(1,&all);
  sched_setaffinity(0,sizeof one,&one);
  for(int c=0;c<2;c++) if(fork()==0){
    sched_setaffinity(0,sizeof all,&all);
    double t0=now(); int moved_at=-1; int c0=sched_getcpu();
    for(long i=0;;i++){
      if(mode==1) sched_yield();
      if(mode==2 && i==1000){ int b=sched_getcpu(); struct timespec ts={0,us*1000}; nanosleep(&ts,0); int a=sched_getcpu(); printf("child %d nap %d->%d\n",c,b,a);}
      if(mode==2) sched_yield();
      if(sched_getcpu()!=c0){ printf("child %d moved %d->%d after %.0f us, %ld iters\n",c,c0,sched_getcpu(),now()-t0,i); break;}
      if(now()-t0>200000){printf("child %d never moved (200 ms), on %d\n",c,c0);break;}
    }
    exit(0);
  }
  while(wait(0)>0);
}
