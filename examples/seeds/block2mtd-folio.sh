#!/bin/sh
# Our own block2mtd folio conversion (block2mtd-folio.patch, written against Debian 12's
# 6.1 kernel) on a real kernel in a VM: the kernel's own mtd_speedtest with the stock
# block2mtd as base and the module built from the patch as patched, then the seed's
# table (its last row, erasing already erased blocks, timed through the MEMERASE ioctl).
#
# STEP=base|patched|compare runs one part (default: all three). SIZE (default 64M) is the
# MTD device; ORDERS (default 0: 4K folios, all a 6.1 block device has) the folio orders,
# e.g. ORDERS=0,2,4 on a 6.15+ kernel (block devices get large folios from 6.15 on). sid's
# kernel is built with a gcc this host lacks, so for it build the kernel from its source:
# BUILD_KERNEL=SRC_DIR (linux-source-7.2 unpacked) with PATCH=block2mtd-folio-7.2.patch,
# the same conversion for 7.x's block2mtd.c. VM=... passes more options to the vm
# subcommand.
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/folio-seeds}
step=${STEP:-all}
mkdir -p "$out"
run() {
    json=$1
    shift
    PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest_folio vm --mtd-tests \
        ${KERNEL:+--kernel "$KERNEL"} ${BUILD_KERNEL:+--build-kernel "$BUILD_KERNEL"} \
        --mtd-size "${SIZE:-64M}" --timeout 1800 ${VM:-} "$@" -- \
        -q -p no:cacheprovider --pyargs pytest_folio.suites.test_kernel_mtd \
        -k speedtest --folio-orders "${ORDERS:-0}" --folio-save "$json" >"$json.log" 2>&1 \
        || { tail -n 5 "$json.log" >&2; exit 1; }
    grep -E "folio-vm: (loaded|kernel|/dev/mtd)|passed|failed" "$json.log" >&2 || true
}
case $step in all|base) run "$out/block2mtd-folio-base.json";; esac
case $step in all|patched) run "$out/block2mtd-folio-patched.json" \
    --patch "${PATCH:-$here/block2mtd-folio.patch}";; esac
case $step in all|compare) ;; *) exit 0;; esac
python -m pytest_folio compare "$out/block2mtd-folio-base.json" \
    "$out/block2mtd-folio-patched.json" \
    --row "Eraseblock read (128 KiB)" --row "Eraseblock write (128 KiB)" \
    --row "Page read (512 B)" --row "Page write (512 B)" \
    --row "2-page read (1 KiB)" --row "2-page write (1 KiB)" \
    --row "Erase, blocks hold data=Erase, blocks hold data (mtd_speedtest)" \
    --row "Erase, already erased=Erase, already erased (MEMERASE ioctl)" ${COMPARE:-}
