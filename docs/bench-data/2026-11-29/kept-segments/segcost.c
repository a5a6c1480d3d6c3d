#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int c,char**v){ size_t len=atoi(v[1])*4096; int N=2000; double t[8]={0};
 for(int i=0;i<N;i++){ double a=now();
  int fd=memfd_create("x",MFD_CLOEXEC); fchmod(fd,0600); ftruncate(fd,len); double b=now();
  char*p=mmap(0,len,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); double c1=now();
  for(size_t o=0;o<len;o+=4096)p[o]=1; double d=now();
  char path[64]; sprintf(path,"/proc/%d/fd/%d",getpid(),fd); int f2=open(path,O_RDWR); struct stat st; fstat(f2,&st); double e=now();
  char*q=mmap(0,len,PROT_READ|PROT_WRITE,MAP_SHARED,f2,0); volatile char s=0; for(size_t o=0;o<len;o+=4096)s+=q[o]; double f=now();
  munmap(q,len); close(f2); double g=now(); munmap(p,len); close(fd); double h=now();
  t[0]+=b-a;t[1]+=c1-b;t[2]+=d-c1;t[3]+=e-d;t[4]+=f-e;t[5]+=g-f;t[6]+=h-g; }
 const char*n[]={"memfd+chmod+trunc","mmap","touch","open+fstat","peer mmap+touch","peer unmap+close","creator unmap+close"};
 for(int k=0;k<7;k++)printf("%s %.2f us\n",n[k],t[k]/N); }
