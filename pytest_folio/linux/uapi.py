"""Kernel UAPI constants shared by the model, the targets and the suites.

include/uapi/mtd/mtd-abi.h (MTD types and flags), include/uapi/linux/falloc.h
(fallocate modes), and the FileSystem protocol's feature names. They live here, below
both the model and the targets, so that neither has to import the other to use them.
"""

# include/uapi/mtd/mtd-abi.h
MTD_ABSENT = 0
MTD_RAM = 1
MTD_ROM = 2
MTD_NORFLASH = 3
MTD_NANDFLASH = 4
MTD_DATAFLASH = 6
MTD_UBIVOLUME = 7
MTD_MLCNANDFLASH = 8

MTD_WRITEABLE = 0x400
MTD_BIT_WRITEABLE = 0x800
MTD_NO_ERASE = 0x1000
MTD_POWERUP_LOCK = 0x2000
MTD_SLC_ON_MLC_EMULATION = 0x4000

MTD_CAP_ROM = 0
MTD_CAP_RAM = MTD_WRITEABLE | MTD_BIT_WRITEABLE | MTD_NO_ERASE
MTD_CAP_NORFLASH = MTD_WRITEABLE | MTD_BIT_WRITEABLE
MTD_CAP_NANDFLASH = MTD_WRITEABLE

# include/uapi/linux/falloc.h
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20

# The fallocate modes vfs_fallocate() lets through to a file system, each with the
# FileSystem feature a target lists for it (the mode fsx's probes try first).
FALLOC_MODE_FEATURE = {
    0: "fallocate", FALLOC_FL_KEEP_SIZE: "fallocate",
    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: "punch_hole",
    FALLOC_FL_ZERO_RANGE: "zero_range", FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE: "zero_range",
    FALLOC_FL_COLLAPSE_RANGE: "collapse_range", FALLOC_FL_INSERT_RANGE: "insert_range",
}
# The mode each of those features is used with (and probed with) first.
FALLOC_FEATURE_MODE = {feature: mode for mode, feature in reversed(FALLOC_MODE_FEATURE.items())}
_FALLOC_NAMES = {FALLOC_FL_PUNCH_HOLE: "FALLOC_FL_PUNCH_HOLE",
                 FALLOC_FL_COLLAPSE_RANGE: "FALLOC_FL_COLLAPSE_RANGE",
                 FALLOC_FL_ZERO_RANGE: "FALLOC_FL_ZERO_RANGE",
                 FALLOC_FL_INSERT_RANGE: "FALLOC_FL_INSERT_RANGE",
                 FALLOC_FL_KEEP_SIZE: "FALLOC_FL_KEEP_SIZE"}


def falloc_mode_name(mode: int) -> str:
    """A mode as C code spells it, KEEP_SIZE last (``FALLOC_FL_PUNCH_HOLE |
    FALLOC_FL_KEEP_SIZE``; ``0``; unknown bits in hex), for reports such as fsx's."""
    words = [name for bit, name in _FALLOC_NAMES.items() if mode & bit]
    rest = mode & ~sum(_FALLOC_NAMES)
    if rest:
        words.append(f"{rest:#x}")
    return " | ".join(words) or "0"
