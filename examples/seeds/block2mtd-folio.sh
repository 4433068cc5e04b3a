#!/bin/sh
# Our own block2mtd folio conversion (block2mtd-folio.patch, written against Debian 12's
# 6.1 kernel) on a real kernel in a VM: the kernel's own mtd_speedtest with the stock
# block2mtd as base and the module built from the patch as patched, then the seed's
# table (its last row, erasing already erased blocks, timed through the MEMERASE ioctl).
#
# STEP=base|patched|compare runs one part (default: all three). STEP=interleaved instead
# boots once and swaps the stock and the patched module in turn, pass by pass, so a busy
# host slows both sides alike (the better measurement on a shared machine); its one run
# holds both sides and compare prints it alone. SIZE (default 64M) is the
# MTD device; ORDERS (default 0: 4K folios, all a 6.1 block device has) the folio orders,
# e.g. ORDERS=0,2,4 on a 6.15+ kernel (block devices get large folios from 6.15 on). sid's
# kernel is built with a gcc this host lacks, so for it build the kernel from its source:
# BUILD_KERNEL=SRC_DIR (linux-source-7.2 unpacked) with PATCH=block2mtd-folio-7.2.patch,
# the same conversion for 7.x's block2mtd.c. VM=... passes more options to the vm
# subcommand.
set -e
python=${PYTHON:-python3}     # the interpreter with pytest-folio (a venv's, unactivated)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/folio-seeds}
step=${STEP:-all}
mkdir -p "$out"
run() {
    json=$1
    shift
    PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$python" -m pytest_folio vm --mtd-tests \
        ${KERNEL:+--kernel "$KERNEL"} ${BUILD_KERNEL:+--build-kernel "$BUILD_KERNEL"} \
        --mtd-size "${SIZE:-64M}" --timeout 1800 ${VM:-} "$@" -- \
        -q -p no:cacheprovider --pyargs pytest_folio.suites.test_kernel_mtd \
        -k speedtest --folio-orders "${ORDERS:-0}" --folio-save "$json" >"$json.log" 2>&1 \
        || { tail -n 5 "$json.log" >&2; exit 1; }
    grep -E "folio-vm: (loaded|kernel|/dev/mtd)|passed|failed" "$json.log" >&2 || true
}
# the seed's table from one run holding both sides, or from a base and a patched run
table() {
    "$python" -m pytest_folio compare "$@" \
        --row "Eraseblock read (128 KiB)" --row "Eraseblock write (128 KiB)" \
        --row "Page read (512 B)" --row "Page write (512 B)" \
        --row "2-page read (1 KiB)" --row "2-page write (1 KiB)" \
        --row "Erase, blocks hold data=Erase, blocks hold data (mtd_speedtest)" \
        --row "Erase, already erased=Erase, already erased (MEMERASE ioctl)" ${COMPARE:-}
}
if [ "$step" = interleaved ]; then
    json=$out/block2mtd-folio-interleaved.json
    PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "$python" -m pytest_folio vm --mtd-tests --interleave \
        ${KERNEL:+--kernel "$KERNEL"} ${BUILD_KERNEL:+--build-kernel "$BUILD_KERNEL"} \
        --patch "${PATCH:-$here/block2mtd-folio.patch}" \
        --mtd-size "${SIZE:-64M}" --timeout 3600 ${VM:-} -- \
        -q -p no:cacheprovider --pyargs pytest_folio.suites.test_kernel_mtd \
        -k interleaved --folio-orders "${ORDERS:-0}" --folio-save "$json" >"$json.log" 2>&1 \
        || { tail -n 5 "$json.log" >&2; exit 1; }
    grep -E "folio-vm: (interleaving|kernel|/dev/mtd)|passed|failed" "$json.log" >&2 || true
    table "$json"
    exit 0
fi
case $step in all|base) run "$out/block2mtd-folio-base.json";; esac
case $step in all|patched) run "$out/block2mtd-folio-patched.json" \
    --patch "${PATCH:-$here/block2mtd-folio.patch}";; esac
case $step in all|compare) ;; *) exit 0;; esac
table "$out/block2mtd-folio-base.json" "$out/block2mtd-folio-patched.json"
