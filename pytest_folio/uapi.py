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

# FileSystem.features vocabulary
FS_FEATURES = frozenset(
    {"mmap", "fallocate", "punch_hole", "zero_range", "collapse_range", "insert_range",
     "copy_range"})

# include/uapi/linux/falloc.h
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20
