#!/bin/sh
# The ramfs blocksize cover letter, reproduced: write bandwidth by block size, 4k to 2M,
# as the seed's | bs | BW(GB/s) | table, on the reference ramfs.
#
# Against a real kernel with the blocksize mount option, mount one block size at a time
# and name the directory (the same table comes from all the saved files):
#   mount -t ramfs -o blocksize=16k ramfs /media/test
#   FS=/media/test SIZES=16k EXTRA=--folio-allow-destructive sh ramfs.sh
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/folio-seeds}
sizes=${SIZES:-4k,8k,16k,32k,64k,128k,256k,512k,1M,2M}
mkdir -p "$out"
save="$out/ramfs-$(echo "$sizes" | tr , _).json"
python -m pytest -q -p no:cacheprovider "$here/test_ramfs_bw.py" \
    --folio-fs "${FS:-reference}" --folio-block-sizes "$sizes" --folio-save "$save" \
    ${EXTRA:-} >"$save.log"
tail -n 1 "$save.log" >&2
python -m pytest_folio bandwidth "$save" ${BANDWIDTH:-}
