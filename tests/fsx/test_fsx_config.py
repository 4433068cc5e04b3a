"""fsx's options and its command-line flags."""

from __future__ import annotations

import pytest

from pytest_folio.fsx.config import FsxOptions, getnum, parse_fsx_args


@pytest.mark.parametrize(("text", "value"), [
    ("4096", 4096), ("0x10", 16), ("010", 8), ("64k", 65536), ("1m", 1 << 20),
    ("2b", 1024), ("3w", 12), ("256K", 262144),
])
def test_getnum_reads_fsx_numbers(text: str, value: int) -> None:
    assert getnum(text) == value


def test_fsx_flags_map_onto_options() -> None:
    opts = parse_fsx_args("-q -l 1m -o 128k -c 4 -N 500 -S 9 -r 4096 -t 512 -w 4k -W -R "
                          "-F -K -H -z -C -I -E -Y -O -n -X -y -s 1")
    assert opts == FsxOptions(
        numops=500, seed=9, maxfilelen=1 << 20, maxoplen=128 << 10, readbdy=4096,
        truncbdy=512, writebdy=4096, closeprob=4, style=1, randomoplen=False,
        sizechecks=False, check_file=True, do_fsync=True, quiet=True, mapped_reads=False,
        mapped_writes=False, fallocate_calls=False, keep_size_calls=False,
        punch_hole_calls=False, zero_range_calls=False, collapse_range_calls=False,
        insert_range_calls=False, copy_range_calls=False, fsync_calls=False)


def test_flags_apply_on_top_of_a_base() -> None:
    base = FsxOptions(numops=7, maxfilelen=4096)
    assert parse_fsx_args(["-o", "512"], base) == FsxOptions(numops=7, maxfilelen=4096,
                                                             maxoplen=512)


@pytest.mark.parametrize(("args", "message"), [
    ("-Z", "option -Z not recognized"),
    ("-l", "option -l requires argument"),
    ("-l 0", "fsx maxfilelen must be positive, not 0"),
    ("-s 2", "fsx style must be 0 or 1"),
    ("-o lots", "fsx: not a number: 'lots'"),
    ("-N 5 fsx.dat", "unexpected 'fsx.dat'"),
    ("-l 3000m", "below 2 GiB"),
])
def test_bad_flags_are_one_line_errors(args: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_fsx_args(args)
    assert "\n" not in str(info.value)
