#!/bin/sh
# The ramfs blocksize cover letter, reproduced: write bandwidth by block size, 4k to 2M,
# as the seed's | bs | BW(GB/s) | table, on the reference ramfs.
#
# VM=1: the same writes into a real kernel ramfs mounted with -o blocksize= at each size,
# in a kernel built with examples/seeds/ramfs-blocksize.patch (python -m pytest_folio vm
# --build-kernel, cached after the first build), the kernel's table printed next to the
# model's. KERNEL_SRC=DIR builds that tree; by default Debian sid's newest linux-source,
# fetched and cached by the runner (debian:SUITE picks another suite). KERNEL=debian:SUITE
# boots that suite's packaged kernel instead, with no kernel build: ramfs is built in
# there, so the runner builds the patched ramfs as module ramfs_patched and mounts that
# (KERNEL=debian:bookworm-backports: Linux 6.12, with ramfs-blocksize-6.12.patch; PATCH=
# names another patch).
#
# Against a kernel of your own with the blocksize mount option, mount one block size at a
# time and name the directory (the same table comes from all the saved files):
#   mount -t ramfs -o blocksize=16k ramfs /media/test
#   FS=/media/test SIZES=16k EXTRA=--folio-allow-destructive sh ramfs.sh
set -e
python=${PYTHON:-python3}     # the interpreter with pytest-folio (a venv's, unactivated)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/folio-seeds}
sizes=${SIZES:-4k,8k,16k,32k,64k,128k,256k,512k,1M,2M}
mkdir -p "$out"
tag=$(echo "$sizes" | tr , _)
save="$out/ramfs-$tag.json"
"$python" -m pytest -q -p no:cacheprovider "$here/test_ramfs_bw.py" \
    --folio-fs "${FS:-reference}" --folio-block-sizes "$sizes" --folio-save "$save" \
    ${EXTRA:-} >"$save.log"
tail -n 1 "$save.log" >&2
if [ -z "${VM:-}" ]; then
    "$python" -m pytest_folio bandwidth "$save" ${BANDWIDTH:-}
    exit 0
fi
kernel="$out/ramfs-kernel-$tag.json"
start=$(date +%s)
if [ -n "${KERNEL:-}" ]; then
    set -- --kernel "$KERNEL" --patch "${PATCH:-$here/ramfs-blocksize-6.12.patch}"
else
    set -- --build-kernel "${KERNEL_SRC:-debian:sid}" --patch "${PATCH:-$here/ramfs-blocksize.patch}"
fi
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$python" -m pytest_folio vm "$@" \
    --fs ramfs --mtd-size 4M --timeout "${TIMEOUT:-3600}" ${VM_ARGS:-} -- \
    -q -p no:cacheprovider "$here/test_ramfs_bw.py" --folio-block-sizes "$sizes" \
    --folio-save "$kernel" ${EXTRA:-} >"$kernel.log"
tail -n 1 "$kernel.log" >&2
echo "kernel run took $(( $(date +%s) - start )) s (the kernel's build included when it was not cached)" >&2
echo "the reference ramfs (the model):"
"$python" -m pytest_folio bandwidth "$save" ${BANDWIDTH:-}
echo "the kernel's ramfs with -o blocksize= (under qemu):"
"$python" -m pytest_folio bandwidth "$kernel" ${BANDWIDTH:-}
