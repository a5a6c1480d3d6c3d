#!/usr/bin/env bash
# scripts/bare-ci.sh [DIR]
#
# Runs CI (`bash .ci/run`) as a bare machine would: in a fresh Debian 12
# chroot that holds only what a "Debian 12 with Rust" machine has (a
# minimal system, gcc, make, git, and this machine's Rust toolchain,
# mounted read-only), on a clone of this checkout's HEAD. So an install
# step that only this machine's hand-installed packages cover fails here,
# as it would on the next machine; a CI run on this machine cannot show
# that. Both Open MPI builds run cold (the whole run took 32 minutes on 2
# cores, docs/testing.md).
#
# DIR (default: a new directory under ${TMPDIR:-/tmp}; if given, it must be
# empty or not exist yet) receives the chroot in DIR/root and its log; it
# is removed at the end unless KEEP=1. Needs root, debootstrap (installed
# with apt-get when missing) and the Debian mirror. The source tarballs of
# Open MPI 5.0/6.0 are mounted read-only from HWBARR_SHARED (default:
# ../shared/openmpi beside this checkout) where .ci/run looks for them.
# BARE_CMD runs another command in the clone instead (e.g. 'make test').
set -euo pipefail

# In a mount namespace of its own: the chroot's mounts are never seen
# outside it and vanish with it, even if this script is killed.
if [ -z "${HWBARR_BARE_NS:-}" ] && [ "$(id -u)" = 0 ]; then
  exec env HWBARR_BARE_NS=1 unshare --mount --propagation private bash "$(readlink -f "$0")" "$@"
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
tarballs=$(readlink -m "${HWBARR_SHARED:-$repo/../shared/openmpi}")
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { echo "bare-ci: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts)"
ls "$tarballs"/openmpi-*.tar.* >/dev/null 2>&1 || die "no Open MPI tarballs in $tarballs (set HWBARR_SHARED to the directory holding them)"
[ -x "$cargo_bin/cargo" ] && [ -d "$rustup_home/toolchains" ] ||
  die "no rustup toolchain at $rustup_home with cargo in $cargo_bin (set RUSTUP_HOME and CARGO_HOME)"
if ! command -v debootstrap >/dev/null; then
  command -v apt-get >/dev/null || die "debootstrap not found"
  echo "bare-ci: installing debootstrap (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

if [ -n "${1:-}" ]; then
  if [ -e "$1" ] && { [ ! -d "$1" ] || [ -n "$(ls -A "$1")" ]; }; then
    die "$1 is not an empty directory: give an empty or new DIR"
  fi
  mkdir -p "$1"
fi
dir=$(readlink -f "${1:-$(mktemp -d "${TMPDIR:-/tmp}/hwbarr-bare.XXXXXX")}")
root=$dir/root
mkdir "$root"

# The chroot is a mount point of its own, so that one recursive unmount
# takes whatever is mounted below it, by this script or by debootstrap.
mount --bind "$root" "$root"
# Stops what still runs in the chroot and unmounts before it removes
# anything: $root/dev is this machine's /dev.
cleanup() {
  local p
  trap - EXIT INT TERM HUP
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
  done
  sleep 1
  umount -R "$root" 2>/dev/null || umount -R -l "$root" 2>/dev/null || true
  if [ "${KEEP:-}" != 1 ]; then
    if grep -qF " $root" /proc/self/mounts; then
      echo "bare-ci: $root still has mounts, left in place" >&2
    else
      rm -rf --one-file-system "$dir"
    fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mnt() { # mnt SOURCE TARGET [ro | rbind | TYPE OPTIONS]
  mkdir -p "$2"
  case "${3:-}" in
    ro) mount --bind "$1" "$2"; mount -o remount,ro,bind "$2" ;;
    rbind) mount --rbind "$1" "$2"; mount --make-rslave "$2" ;;
    "") mount --bind "$1" "$2" ;;
    *) mount -t "$3" -o "${4:-defaults}" "$1" "$2" ;;
  esac
}

echo "bare-ci: debootstrap bookworm into $root (log: $dir/debootstrap.log)"
debootstrap --variant=minbase --include=gcc,libc6-dev,make,git,ca-certificates \
  bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 || die "debootstrap failed (see $dir/debootstrap.log)"

mnt proc "$root/proc" proc
mnt /sys "$root/sys" rbind
mnt /dev "$root/dev"
mnt devpts "$root/dev/pts" devpts newinstance,ptmxmode=0666
mnt tmpfs "$root/dev/shm" tmpfs size=50%
mnt "$rustup_home" "$root/root/.rustup" ro
mnt "$cargo_bin" "$root/root/.cargo/bin" ro
mnt "$tarballs" "$root/work/shared/openmpi" ro
# This machine's name service and certificate authorities (a proxy may
# sign the registries' certificates with its own).
cp /etc/resolv.conf /etc/hosts "$root/etc/"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"; fi

git clone -q "$repo" "$root/work/main"
cmd=${BARE_CMD:-bash .ci/run}
echo "bare-ci: running '$cmd' on $(git -C "$repo" log --oneline -1 | cut -c1-60)"
t0=$(date +%s)
set +e
env -i HOME=/root LANG=C.UTF-8 PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  "$(command -v chroot)" "$root" /bin/bash -c "cd /work/main && $cmd"
rc=$?
set -e
echo "bare-ci: exited $rc after $(( $(date +%s) - t0 )) s"
exit $rc
