/*
 * The userspace anchor for benchmarks/mtd_device_speed.py: what a C tool (as mtd-utils'
 * flash_speed and flash_stress are) gets from /dev/mtdN for the rows our runners time.
 * Written for pytest-folio; Debian's mtd-utils does not ship flash_speed/flash_stress.
 *
 *   mtd_userspace DEVICE PASSES COUNT
 *
 * Per pass: erase the device, write it one eraseblock per pwrite() and read it back one
 * eraseblock per pread(); the same with one call per page (512 bytes when writesize is 1,
 * as mtd_speedtest) and per two pages. Every read is compared with what was written (as
 * our runners compare; flash_speed does not). Then COUNT stress operations with the op
 * mix of pytest_folio.mtdtests.stress (reads of up to two eraseblocks from anywhere,
 * writes that fill erased space from the front, erasing a full block first), every read
 * compared with a copy of the device. Prints "ROW <name>\t<median ms>" lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <mtd/mtd-user.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static int fd;
static struct mtd_info_user info;
static unsigned char *iobuf, *readbuf;

static void die(const char *what, long long at)
{
	fprintf(stderr, "mtd_userspace: %s at %lld: %s\n", what, at, strerror(errno));
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void erase_block(uint32_t eb, uint32_t n)
{
	struct erase_info_user ei = { eb * info.erasesize, n * info.erasesize };

	if (ioctl(fd, MEMERASE, &ei) < 0)
		die("MEMERASE", ei.start);
}

static void erase_all(void)
{
	for (uint32_t eb = 0; eb < info.size / info.erasesize; eb++)
		erase_block(eb, 1);
}

/* one pass over the device in `chunk`-byte calls; returns its ms */
static double pass(uint32_t chunk, int write)
{
	double start = now_ms();

	for (uint32_t off = 0; off < info.size; off += chunk) {
		uint32_t in_eb = off % info.erasesize;
		ssize_t done = write ? pwrite(fd, iobuf + in_eb, chunk, off)
				     : pread(fd, readbuf + in_eb, chunk, off);
		if (done != (ssize_t)chunk)
			die(write ? "pwrite" : "pread", off);
		if (!write && in_eb + chunk == info.erasesize &&
		    memcmp(readbuf, iobuf, info.erasesize))
			die("read back differs", off);
	}
	return now_ms() - start;
}

static int by_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), by_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng = 88172645463325252ULL;

static uint32_t rnd(uint32_t below)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return below ? rng % below : 0;
}

static double stress(long count)
{
	uint32_t esz = info.erasesize, ebcnt = info.size / esz, bufsize = 2 * esz;
	uint32_t pgsize = info.writesize > 1 ? info.writesize : 512;
	uint32_t *offsets = malloc(ebcnt * sizeof(*offsets));
	unsigned char *shadow = malloc(info.size), *pool = malloc(2 * bufsize);
	unsigned char *buf = malloc(bufsize);
	double start;

	for (uint32_t i = 0; i < 2 * bufsize; i++)
		pool[i] = rnd(256);
	erase_all();
	memset(shadow, 0xff, info.size);
	for (uint32_t eb = 0; eb < ebcnt; eb++)
		offsets[eb] = 0;
	start = now_ms();
	for (long op = 0; op < count; op++) {
		uint32_t eb = rnd(ebcnt - 1), offs, len, addr;

		if (rnd(2)) {
			offs = rnd(bufsize);
			len = rnd(bufsize - offs);
			addr = eb * esz + offs;
			if (pread(fd, buf, len, addr) != (ssize_t)len)
				die("pread", addr);
			if (memcmp(buf, shadow + addr, len))
				die("stress read differs", addr);
			continue;
		}
		offs = offsets[eb];
		if (offs >= esz) {
			erase_block(eb, 1);
			memset(shadow + eb * esz, 0xff, esz);
			offs = offsets[eb] = 0;
		}
		len = rnd(bufsize - offs);
		len = (len + pgsize - 1) / pgsize * pgsize;
		if (offs + len > esz) {
			erase_block(eb + 1, 1);
			memset(shadow + (eb + 1) * esz, 0xff, esz);
			offsets[eb + 1] = 0;
		}
		addr = eb * esz + offs;
		unsigned char *data = pool + rnd(2 * bufsize - len + 1);
		if (pwrite(fd, data, len, addr) != (ssize_t)len)
			die("pwrite", addr);
		memcpy(shadow + addr, data, len);
		offs += len;
		while (offs > esz) {
			offsets[eb++] = esz;
			offs -= esz;
		}
		offsets[eb] = offs;
	}
	for (uint32_t eb = 0; eb < ebcnt; eb++) {
		if (pread(fd, buf, esz, eb * esz) != (ssize_t)esz)
			die("pread", eb * esz);
		if (memcmp(buf, shadow + eb * esz, esz))
			die("final compare differs", eb * esz);
	}
	return now_ms() - start;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		"Eraseblock write", "Eraseblock read", "Page write", "Page read",
		"2-page write", "2-page read",
	};
	int passes;
	double *samples[6];

	if (argc != 4) {
		fprintf(stderr, "usage: mtd_userspace DEVICE PASSES COUNT\n");
		return 2;
	}
	passes = atoi(argv[2]);
	fd = open(argv[1], O_RDWR);
	if (fd < 0 || ioctl(fd, MEMGETINFO, &info) < 0)
		die(argv[1], 0);
	uint32_t pgsize = info.writesize > 1 ? info.writesize : 512;
	uint32_t chunks[3] = { info.erasesize, pgsize, 2 * pgsize };

	iobuf = malloc(info.erasesize);
	readbuf = malloc(info.erasesize);
	for (uint32_t i = 0; i < info.erasesize; i++)
		iobuf[i] = rnd(256);
	for (int k = 0; k < 6; k++)
		samples[k] = calloc(passes, sizeof(double));
	for (int p = 0; p < passes; p++) {
		for (int k = 0; k < 3; k++) {
			erase_all();
			samples[2 * k][p] = pass(chunks[k], 1);
			samples[2 * k + 1][p] = pass(chunks[k], 0);
		}
	}
	for (int k = 0; k < 6; k++)
		printf("ROW %s\t%.3f\n", names[k], median(samples[k], passes));
	printf("ROW Stress\t%.3f\n", stress(atol(argv[3])));
	return 0;
}
