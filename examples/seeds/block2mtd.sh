#!/bin/sh
# The block2mtd folio cover letter, reproduced: mtd_speedtest over a 256 MiB device at
# folio sizes 4K, 16K and 64K, the page-wrapper path saved as base and the folio path as
# patched, then the cover letter's table and the compound_head calls per pass.
#
# STEP=base|patched|compare runs one part (default: all three). Against a real kernel,
# run STEP=base booted into the base kernel and STEP=patched into the patched one, with
# BASE_MTD / PATCHED_MTD=/dev/mtd0 and EXTRA=--folio-allow-destructive (docs/timing.md).
set -e
python=${PYTHON:-python3}     # the interpreter with pytest-folio (a venv's, unactivated)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/folio-seeds}
step=${STEP:-all}
mkdir -p "$out"
run() {
    "$python" -m pytest -q -p no:cacheprovider -c "$here/pytest.ini" \
        --pyargs pytest_folio.suites.test_mtd_speed \
        --folio-mtd-size "${SIZE:-256M}" --folio-orders "${ORDERS:-0,2,4}" \
        --folio-mtd "$1" --folio-save "$2" ${EXTRA:-} >"$2.log"
    tail -n 1 "$2.log" >&2
}
case $step in all|base) run "${BASE_MTD:-reference:api=page}" "$out/block2mtd-base.json";; esac
case $step in all|patched) run "${PATCHED_MTD:-reference:api=folio}" "$out/block2mtd-patched.json";; esac
case $step in all|compare) ;; *) exit 0;; esac
"$python" -m pytest_folio compare "$out/block2mtd-base.json" "$out/block2mtd-patched.json" \
    --row "Eraseblock read (128 KiB)" --row "Eraseblock write (128 KiB)" \
    --row "Page read (512 B)" --row "Page write (512 B)" \
    --row "2-page read (1 KiB)" --row "2-page write (1 KiB)" \
    --row "Erase, blocks hold data=Erase, blocks hold data (mtd_speedtest)" \
    --row "Erase, already erased=Erase, already erased (MEMERASE ioctl)" \
    --counter compound_head ${COMPARE:-}
