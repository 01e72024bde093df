// The C ABI's tests: a plain C program, compiled against include/spillway.h and linked to
// build/libspillway.so, with no JVM in the process. Run by test/c/run.sh (make test-c), which
// gives it a scratch dir and the mount point of a small tmpfs for the disk-full test.
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spillway.h"

static _Atomic int failures;
static const char *current;

#define CHECK(cond, ...)                                                                  \
	do {                                                                                  \
		if (!(cond)) {                                                                    \
			failures++;                                                                   \
			fprintf(stderr, "FAIL %s (%s:%d): %s: ", current, __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                                 \
			fputc('\n', stderr);                                                          \
		}                                                                                 \
	} while (0)

// OK runs a call that must succeed, printing its message if it does not.
#define OK(call)                                                                                    \
	do {                                                                                            \
		spillway_error ok_err_;                                                                     \
		ok_err_.message[0] = 0;                                                                     \
		int32_t ok_rc_ = (call);                                                                    \
		CHECK(ok_rc_ == SPILLWAY_OK, "%s returned %d: %s", #call, (int)ok_rc_, ok_err_.message); \
	} while (0)
#define E (&ok_err_)

// FAILS runs a call that must fail with code, its message containing want (NULL for any).
#define FAILS(code, want, call)                                   \
	do {                                                          \
		spillway_error f_err_;                                    \
		memset(&f_err_, 'x', sizeof f_err_);                      \
		int32_t f_rc_ = (call);                                   \
		check_failure(f_rc_, (code), (want), &f_err_, #call, __LINE__); \
	} while (0)
#define F (&f_err_)

static void check_failure(int32_t rc, int32_t code, const char *want, const spillway_error *err, const char *call,
                          int line) {
	if (rc != code) {
		failures++;
		fprintf(stderr, "FAIL %s (line %d): %s returned %d, want %d: %.*s\n", current, line, call, (int)rc, (int)code,
		        rc == SPILLWAY_OK ? 0 : (int)sizeof err->message, err->message);
		return;
	}
	if (memchr(err->message, 0, sizeof err->message) == NULL || err->message[0] == 0) {
		failures++;
		fprintf(stderr, "FAIL %s (line %d): %s: message empty or not terminated\n", current, line, call);
	} else if (want != NULL && strstr(err->message, want) == NULL) {
		failures++;
		fprintf(stderr, "FAIL %s (line %d): %s: message \"%s\" does not contain \"%s\"\n", current, line, call,
		        err->message, want);
	}
}

static char scratch[2048];

// entries counts the entries of dir (-1 if it cannot be read).
static int entries(const char *dir) {
	DIR *d = opendir(dir);
	if (d == NULL) {
		return -1;
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			n++;
		}
	}
	closedir(d);
	return n;
}

// make_root creates scratch/name and returns its path (static storage per slot).
static const char *make_root(int slot, const char *name) {
	static char roots[8][4096];
	snprintf(roots[slot], sizeof roots[slot], "%s/%s", scratch, name);
	CHECK(mkdir(roots[slot], 0700) == 0, "mkdir %s: %s", roots[slot], strerror(errno));
	return roots[slot];
}

static void remove_root(const char *root) {
	CHECK(entries(root) == 0, "%s is not empty at the end of %s", root, current);
	CHECK(rmdir(root) == 0, "rmdir %s: %s", root, strerror(errno));
}

// fill puts n deterministic bytes, compressible or not, in buf.
static void fill(uint8_t *buf, size_t n, uint32_t seed, int compressible) {
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = compressible ? (uint8_t)('a' + (i / 64 + seed) % 4) : (uint8_t)x;
	}
}

// counter is the value of the counter named name now (-1 if it cannot be read), found by its name as every
// caller should: the library owns the list.
static int64_t counter(const char *name) {
	int64_t v = -1;
	OK(spillway_stats_value(name, &v, E));
	return v;
}

// write_file creates a file in plan, writes data in pieces of varying size, and finishes it.
static int64_t write_file(int64_t plan, const uint8_t *data, int64_t n) {
	int64_t file = 0;
	OK(spillway_spill_file_create(plan, &file, E));
	int64_t off = 0, piece = 1;
	while (off < n) {
		int64_t len = piece < n - off ? piece : n - off;
		OK(spillway_spill_file_write(file, data + off, len, E));
		off += len;
		piece = piece * 7 + 3; // 1, 10, 73, ... up past the chunk size
	}
	OK(spillway_spill_file_finish(file, E));
	return file;
}

// read_all reads the whole file through a new reader with reads of cap bytes and compares it.
static void read_all(int64_t file, const uint8_t *want, int64_t n, int64_t cap) {
	int64_t reader = 0, got = 0, count = 0;
	OK(spillway_reader_open(file, &reader, E));
	uint8_t *buf = malloc((size_t)cap);
	for (;;) {
		OK(spillway_reader_read(reader, buf, cap, &count, E));
		if (count == -1) {
			break;
		}
		CHECK(count >= 1 && count <= cap, "read %lld bytes with cap %lld", (long long)count, (long long)cap);
		if (count < 1 || got + count > n) {
			break;
		}
		CHECK(memcmp(buf, want + got, (size_t)count) == 0, "bytes %lld.. differ", (long long)got);
		got += count;
	}
	CHECK(got == n, "read %lld bytes, wrote %lld", (long long)got, (long long)n);
	OK(spillway_reader_read(reader, buf, cap, &count, E));
	CHECK(count == -1, "a read after the end gave %lld", (long long)count);
	OK(spillway_reader_close(reader, E));
	free(buf);
}

static void test_version(void) {
	current = "version";
	CHECK(spillway_abi_version() == SPILLWAY_ABI_VERSION, "abi version %d", spillway_abi_version());
}

// The counters by name: each index has a name and a kind, one read gives every value, and a plan
// created and released moves the counts a reader finds by name.
static void test_stats(void) {
	current = "stats";
	int32_t n = 0;
	OK(spillway_stats_count(&n, E));
	CHECK(n >= 11 && n <= 64, "%d counters", (int)n);
	if (n < 1 || n > 64) {
		return;
	}
	int created_at = -1, live_at = -1;
	for (int32_t i = 0; i < n; i++) {
		const char *name = NULL;
		int32_t kind = 0;
		OK(spillway_stats_describe(i, &name, &kind, E));
		CHECK(name != NULL && name[0] != 0, "counter %d has no name", (int)i);
		CHECK(kind == SPILLWAY_STAT_COUNT || kind == SPILLWAY_STAT_LEVEL, "counter %d has kind %d", (int)i, (int)kind);
		if (name == NULL) {
			continue;
		}
		for (int32_t k = 0; k < i; k++) {
			const char *other = NULL;
			OK(spillway_stats_describe(k, &other, NULL, E));
			CHECK(other == NULL || strcmp(other, name) != 0, "counters %d and %d are both %s", (int)k, (int)i, name);
		}
		if (strcmp(name, "plansCreated") == 0) {
			created_at = i;
			CHECK(kind == SPILLWAY_STAT_COUNT, "plansCreated is a count");
		}
		if (strcmp(name, "livePlans") == 0) {
			live_at = i;
			CHECK(kind == SPILLWAY_STAT_LEVEL, "livePlans is a level");
		}
	}
	CHECK(created_at >= 0 && live_at >= 0, "plansCreated at %d, livePlans at %d", created_at, live_at);
	if (created_at < 0 || live_at < 0) {
		return;
	}
	int64_t before[64], after[64];
	OK(spillway_stats_read(before, n, E));
	CHECK(counter("plansCreated") == before[created_at], "by name and by index differ");
	const char *roots[1] = {make_root(0, "stats")};
	int64_t plan = 0;
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	CHECK(counter("livePlans") == before[live_at] + 1, "the new plan is not live");
	OK(spillway_plan_release(plan, E));
	OK(spillway_stats_read(after, n, E));
	CHECK(after[created_at] == before[created_at] + 1, "plansCreated %lld, before %lld", (long long)after[created_at],
	      (long long)before[created_at]);
	CHECK(after[live_at] == before[live_at], "livePlans %lld, before %lld", (long long)after[live_at],
	      (long long)before[live_at]);
	int64_t first = -7;
	OK(spillway_stats_read(&first, 1, E)); // the first counter alone
	CHECK(first >= 0, "the first counter read alone is %lld", (long long)first);
	OK(spillway_stats_read(NULL, 0, E));
	remove_root(roots[0]);
}

// No dir until the first file, and then only in the root it lands in; release removes it.
static void test_lazy_dirs(void) {
	current = "lazy dirs";
	const char *roots[2] = {make_root(0, "lazy-a"), make_root(1, "lazy-b")};
	int64_t plan = 0;
	OK(spillway_plan_create(roots, 2, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	CHECK(plan != 0, "plan handle 0");
	CHECK(entries(roots[0]) == 0 && entries(roots[1]) == 0, "a plan that created no file made a dir");
	int64_t file = 0;
	OK(spillway_spill_file_create(plan, &file, E));
	int a = entries(roots[0]), b = entries(roots[1]);
	CHECK((a == 0) != (b == 0), "one root should have the plan's dir, found %d and %d entries", a, b);
	char path[4096];
	int64_t len = 0;
	OK(spillway_spill_file_path(file, path, sizeof path, &len, E));
	CHECK(len == (int64_t)strlen(path), "len_out %lld for %s", (long long)len, path);
	const char *landed = a > 0 ? roots[0] : roots[1];
	CHECK(strncmp(path, landed, strlen(landed)) == 0 && path[strlen(landed)] == '/', "%s is not under %s", path, landed);
	CHECK(access(path, F_OK) == 0, "%s does not exist", path);
	OK(spillway_plan_release(plan, E));
	CHECK(access(path, F_OK) != 0, "%s is left after release", path);
	remove_root(roots[0]);
	remove_root(roots[1]);
}

// A plan registered once creates plans with no strings; plans of one registration are separate.
static void test_registered_dirs(void) {
	current = "registered dirs";
	const char *roots[1] = {make_root(0, "registered")};
	int64_t dirs = 0, plan1 = 0, plan2 = 0, file = 0;
	OK(spillway_local_dirs_register(roots, 1, &dirs, E));
	OK(spillway_plan_create_in(dirs, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan1, E));
	OK(spillway_plan_create_in(dirs, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan2, E));
	CHECK(plan1 != plan2, "two plans, one handle");
	CHECK(entries(roots[0]) == 0, "plans made dirs before any file");
	OK(spillway_spill_file_create(plan1, &file, E));
	CHECK(entries(roots[0]) > 0, "a file and no plan dir");
	OK(spillway_local_dirs_release(dirs, E));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "local dirs registration", spillway_plan_create_in(dirs, 1, 1, &plan1, F));
	OK(spillway_spill_file_create(plan2, &file, E)); // a plan outlives its registration
	OK(spillway_plan_release(plan1, E));
	OK(spillway_plan_release(plan2, E));
	remove_root(roots[0]);
}

// Bytes written come back identical through several readers at once; sizes and path agree with
// the disk.
static void test_round_trip(void) {
	current = "round trip";
	const char *roots[1] = {make_root(0, "round-trip")};
	int64_t plan = 0;
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	const int64_t n = 1300 * 1000;
	uint8_t *data = malloc(n);
	fill(data, n, 7, 0);
	int64_t file = write_file(plan, data, n);

	int64_t logical = -1, stored = -1, used = -1, len = 0;
	OK(spillway_spill_file_size(file, &logical, &stored, E));
	CHECK(logical == n, "logical size %lld, wrote %lld", (long long)logical, (long long)n);
	CHECK(stored > n, "incompressible bytes framed take more: stored %lld", (long long)stored);
	OK(spillway_spill_file_size(file, NULL, NULL, E));
	int64_t only = -1;
	OK(spillway_spill_file_size(file, NULL, &only, E));
	CHECK(only == stored, "stored alone %lld", (long long)only);
	OK(spillway_plan_used_disk_space(plan, &used, E));
	CHECK(used == stored, "used %lld, stored %lld", (long long)used, (long long)stored);
	char path[4096];
	OK(spillway_spill_file_path(file, path, sizeof path, &len, E));
	struct stat st;
	CHECK(stat(path, &st) == 0 && st.st_size == stored, "%s has %lld bytes on disk, stored %lld", path,
	      (long long)st.st_size, (long long)stored);

	// Three readers at once, interleaved, each with its own read size.
	int64_t readers[3], got[3] = {0, 0, 0}, caps[3] = {1, 4096, 1 << 20};
	uint8_t *buf = malloc(1 << 20);
	for (int i = 0; i < 3; i++) {
		OK(spillway_reader_open(file, &readers[i], E));
	}
	for (int done = 0; done < 3;) {
		done = 0;
		for (int i = 0; i < 3; i++) {
			int64_t count = 0;
			if (got[i] == n) {
				done++;
				continue;
			}
			OK(spillway_reader_read(readers[i], buf, caps[i] == 1 ? 1 + (got[i] % 5000) : caps[i], &count, E));
			if (count <= 0) {
				CHECK(0, "reader %d stopped at %lld with %lld", i, (long long)got[i], (long long)count);
				got[i] = n;
				continue;
			}
			CHECK(memcmp(buf, data + got[i], (size_t)count) == 0, "reader %d: bytes at %lld differ", i, (long long)got[i]);
			got[i] += count;
		}
	}
	for (int i = 0; i < 3; i++) {
		int64_t count = 0;
		OK(spillway_reader_read(readers[i], buf, 10, &count, E));
		CHECK(count == -1, "reader %d at the end read %lld", i, (long long)count);
		OK(spillway_reader_read(readers[i], NULL, 0, &count, E));
		OK(spillway_reader_close(readers[i], E));
	}
	read_all(file, data, n, 100000);

	// An empty file reads as empty.
	int64_t empty = write_file(plan, data, 0);
	read_all(empty, data, 0, 10);
	OK(spillway_spill_file_release(empty, E));

	OK(spillway_spill_file_release(file, E));
	OK(spillway_plan_used_disk_space(plan, &used, E));
	CHECK(used == 0, "used %lld after the files were released", (long long)used);
	CHECK(access(path, F_OK) != 0, "%s is left after its release", path);
	OK(spillway_plan_release(plan, E));
	free(buf);
	free(data);
	remove_root(roots[0]);
}

// The plan's limit refuses the write that would pass it, naming the Spark setting; what was
// accepted before stays readable.
static void test_plan_limit(void) {
	current = "plan limit";
	const char *roots[1] = {make_root(0, "plan-limit")};
	int64_t plan = 0, file = 0, used = 0;
	const int64_t n = 600 * 1000;
	uint8_t *data = malloc(n);
	fill(data, n, 3, 0);
	OK(spillway_plan_create(roots, 1, 400 * 1000, SPILLWAY_UNLIMITED, &plan, E));
	int64_t refused_before = counter("limitFailures");
	int64_t small = write_file(plan, data, 100 * 1000);
	OK(spillway_spill_file_create(plan, &file, E));
	FAILS(SPILLWAY_ERR_LIMIT_EXCEEDED, "spark.spillway.maxTempDirectorySize", spillway_spill_file_write(file, data, n, F));
	FAILS(SPILLWAY_ERR_LIMIT_EXCEEDED, NULL, spillway_spill_file_write(file, data, 10, F)); // no more writes
	OK(spillway_plan_used_disk_space(plan, &used, E));
	CHECK(used <= 400 * 1000, "used %lld passes the limit", (long long)used);
	CHECK(counter("limitFailures") > refused_before, "the refusal was not counted");
	read_all(small, data, 100 * 1000, 65536);
	OK(spillway_plan_release(plan, E));
	free(data);
	remove_root(roots[0]);
}

// The executor's limit is over the bytes of all plans of the process, each plan checking its own.
static void test_executor_limit(void) {
	current = "executor limit";
	const char *roots[1] = {make_root(0, "executor-limit")};
	int64_t a = 0, b = 0, file = 0;
	const int64_t n = 400 * 1000, limit = 600 * 1000;
	uint8_t *data = malloc(n);
	fill(data, n, 5, 0);
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, limit, &a, E));
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, limit, &b, E));
	int64_t first = write_file(a, data, n);
	OK(spillway_spill_file_create(b, &file, E));
	FAILS(SPILLWAY_ERR_LIMIT_EXCEEDED, "spark.spillway.maxExecutorTempDirectorySize", spillway_spill_file_write(file, data, n, F));
	OK(spillway_spill_file_release(file, E));
	OK(spillway_spill_file_release(first, E)); // a's bytes given back: b fits now
	int64_t second = write_file(b, data, n);
	read_all(second, data, n, 1 << 16);
	OK(spillway_plan_release(a, E));
	OK(spillway_plan_release(b, E));
	free(data);
	remove_root(roots[0]);
}

// Releasing a plan closes its readers and deletes its files and dirs, in every root; every
// handle in it is then invalid.
static void test_release_removes_everything(void) {
	current = "release";
	const char *roots[3] = {make_root(0, "release-a"), make_root(1, "release-b"), make_root(2, "release-c")};
	int64_t live_before = counter("livePlans"), in_use_before = counter("bytesInUse");
	int64_t plan = 0, files[12], readers[4];
	uint8_t data[5000];
	fill(data, sizeof data, 9, 1);
	OK(spillway_plan_create(roots, 3, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	for (int i = 0; i < 12; i++) {
		if (i < 4) {
			files[i] = write_file(plan, data, sizeof data);
			OK(spillway_reader_open(files[i], &readers[i], E));
		} else {
			OK(spillway_spill_file_create(plan, &files[i], E));
			OK(spillway_spill_file_write(files[i], data, sizeof data, E));
		}
	}
	CHECK(counter("livePlans") == live_before + 1, "live plans");
	OK(spillway_plan_release(plan, E));
	for (int r = 0; r < 3; r++) {
		CHECK(entries(roots[r]) == 0, "%s keeps %d entries", roots[r], entries(roots[r]));
	}
	int64_t count = 7, out = 7;
	uint8_t buf[16];
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_plan_release(plan, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_spill_file_create(plan, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "no live file", spillway_spill_file_write(files[5], data, 10, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "spill file", spillway_spill_file_release(files[0], F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "reader", spillway_reader_read(readers[0], buf, 16, &count, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "reader", spillway_reader_close(readers[1], F));
	CHECK(count == 7 && out == 7, "a failed call wrote an out-parameter");
	CHECK(counter("livePlans") == live_before, "live plans %lld, before %lld", (long long)counter("livePlans"),
	      (long long)live_before);
	CHECK(counter("bytesInUse") == in_use_before, "bytes in use %lld, before %lld", (long long)counter("bytesInUse"),
	      (long long)in_use_before);
	for (int r = 0; r < 3; r++) {
		remove_root(roots[r]);
	}
}

// Every bad argument fails with its code and a message, writes no out-parameter and changes
// nothing, with err given or NULL.
static void test_bad_inputs(void) {
	current = "bad inputs";
	const char *roots[1] = {make_root(0, "bad-inputs")};
	int64_t plan = 0, file = 0, unfinished = 0, reader = 0, dirs = 0;
	uint8_t data[100];
	fill(data, sizeof data, 1, 1);
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	file = write_file(plan, data, sizeof data);
	OK(spillway_spill_file_create(plan, &unfinished, E));
	OK(spillway_reader_open(file, &reader, E));
	const char *unchanged[4] = {"livePlans", "spillFiles", "dirsCreated", "bytesInUse"};
	int64_t counters_before[4];
	for (int i = 0; i < 4; i++) {
		counters_before[i] = counter(unchanged[i]);
	}
	int entries_before = entries(roots[0]);
	int64_t used_before = 0, logical_before = 0;
	OK(spillway_plan_used_disk_space(plan, &used_before, E));
	OK(spillway_spill_file_size(unfinished, &logical_before, NULL, E));

	const int64_t sentinel = 0x5eed;
	int64_t out = sentinel, out2 = sentinel;
	const int64_t forged = 12345;
	const char *relative[1] = {"relative/dir"};
	const char *null_element[2] = {roots[0], NULL};
	const char *bad_utf8[1] = {"/tmp/\xff\xfe"};
	const char *empty[1] = {""};
	const char *twice[2] = {roots[0], roots[0]};

	// Dir lists, through both ways of naming them.
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "local_dirs is NULL", spillway_plan_create(NULL, 1, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "local_dirs[1] is null", spillway_plan_create(null_element, 2, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "no local dirs", spillway_plan_create(roots, 0, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "n_dirs is -1", spillway_plan_create(roots, -1, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "n_dirs is -1", spillway_local_dirs_register(roots, -1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "more than", spillway_plan_create(roots, INT32_MAX, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "relative", spillway_plan_create(relative, 1, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "not valid UTF-8 (at byte 5)", spillway_plan_create(bad_utf8, 1, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "not valid UTF-8", spillway_local_dirs_register(bad_utf8, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "empty", spillway_plan_create(empty, 1, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "twice", spillway_local_dirs_register(twice, 2, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "negative", spillway_plan_create(roots, 1, -1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "negative", spillway_plan_create(roots, 1, 1, -5, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "plan_out is NULL", spillway_plan_create(roots, 1, 1, 1, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "dirs_out is NULL", spillway_local_dirs_register(roots, 1, NULL, F));
	char *long_path = malloc(40000);
	memset(long_path, 'a', 39999);
	long_path[0] = '/';
	long_path[39999] = 0;
	const char *too_long[1] = {long_path};
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "is 39999 bytes long", spillway_plan_create(too_long, 1, 1, 1, &out, F));
	free(long_path);
	OK(spillway_local_dirs_register(roots, 1, &dirs, E));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "plan_out is NULL", spillway_plan_create_in(dirs, 1, 1, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "negative", spillway_plan_create_in(dirs, -1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "local dirs registration", spillway_plan_create_in(forged, 1, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "local dirs registration", spillway_local_dirs_release(forged, F));
	OK(spillway_local_dirs_release(dirs, E));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "local dirs registration", spillway_local_dirs_release(dirs, F));

	// Forged handles, and handles of another kind, name what they are not.
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "no live plan has handle 12345", spillway_plan_release(forged, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_plan_release(file, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_plan_used_disk_space(forged, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_spill_file_create(file, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "no live file", spillway_spill_file_write(plan, data, 1, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "spill file", spillway_spill_file_finish(reader, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "no live file", spillway_spill_file_size(forged, &out, &out2, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "no live file", spillway_spill_file_path(forged, NULL, 0, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "spill file", spillway_spill_file_release(plan, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "spill file", spillway_reader_open(forged, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "reader", spillway_reader_read(file, data, 1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "reader", spillway_reader_close(plan, F));

	// Out of order: read before finish, write after it.
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, NULL, spillway_reader_open(unfinished, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, NULL, spillway_spill_file_write(file, data, 1, F));

	// NULL out-parameters, negative lengths, NULL buffers.
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "bytes_out is NULL", spillway_plan_used_disk_space(plan, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "file_out is NULL", spillway_spill_file_create(plan, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "len is -1", spillway_spill_file_write(unfinished, data, -1, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "buf is NULL", spillway_spill_file_write(unfinished, NULL, 10, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "reader_out is NULL", spillway_reader_open(file, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "n_out is NULL", spillway_reader_read(reader, data, 10, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "cap is -3", spillway_reader_read(reader, data, -3, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "buf is NULL", spillway_reader_read(reader, NULL, 10, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "len_out is NULL", spillway_spill_file_path(file, (char *)data, 100, NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "cap is -1", spillway_spill_file_path(file, (char *)data, -1, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "buf is NULL", spillway_spill_file_path(file, NULL, 10, &out, F));
	int32_t n_stats = 0;
	OK(spillway_stats_count(&n_stats, E));
	int64_t values[64];
	const char *name = NULL;
	int32_t kind = 0, count_out = (int32_t)sentinel;
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "count_out is NULL", spillway_stats_count(NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "index is -1", spillway_stats_describe(-1, &name, &kind, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "the counters are 0 to", spillway_stats_describe(n_stats, &name, &kind, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "n is -1", spillway_stats_read(values, -1, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "the number of counters", spillway_stats_read(values, n_stats + 1, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "values is NULL", spillway_stats_read(NULL, 1, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "name is NULL", spillway_stats_value(NULL, &out, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "value_out is NULL", spillway_stats_value("livePlans", NULL, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "no counter named \"live_plans\"; the counters are livePlans",
	      spillway_stats_value("live_plans", &out, F));
	CHECK(name == NULL && kind == 0 && count_out == (int32_t)sentinel, "a failed stats call wrote an out-parameter");
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "codec is NULL", spillway_configure_format(NULL, 1, 0, 128, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "snappy", spillway_configure_format("snappy", 1, 0, 128, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, NULL, spillway_configure_format("zstd", 99, 0, 128, F));
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, NULL, spillway_configure_format("none", 1, 1, 100, F));
	char long_codec[300];
	memset(long_codec, 'z', sizeof long_codec - 1);
	long_codec[sizeof long_codec - 1] = 0;
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "codec name of 299 bytes", spillway_configure_format(long_codec, 1, 0, 128, F));
	CHECK(out == sentinel && out2 == sentinel, "a failed call wrote an out-parameter: %lld %lld", (long long)out,
	      (long long)out2);

	// A path buffer too small: the length is told, the buffer untouched.
	char small[8];
	memset(small, '#', sizeof small);
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, "the path needs", spillway_spill_file_path(file, small, sizeof small, &out, F));
	CHECK(out > 8, "len_out %lld for a path that did not fit", (long long)out);
	for (size_t i = 0; i < sizeof small; i++) {
		CHECK(small[i] == '#', "byte %zu of a buffer too small was written", i);
	}
	int64_t len = 0;
	FAILS(SPILLWAY_ERR_INVALID_ARGUMENT, NULL, spillway_spill_file_path(file, NULL, 0, &len, F));
	CHECK(len == out, "len_out %lld then %lld", (long long)out, (long long)len);
	char *exact = malloc((size_t)len + 1);
	OK(spillway_spill_file_path(file, exact, len + 1, &out2, E));
	CHECK(out2 == len && strlen(exact) == (size_t)len, "the path did not fit exactly");
	free(exact);

	// err may be NULL: the code alone.
	CHECK(spillway_plan_release(forged, NULL) == SPILLWAY_ERR_INVALID_HANDLE, "NULL err");
	CHECK(spillway_spill_file_write(unfinished, NULL, 5, NULL) == SPILLWAY_ERR_INVALID_ARGUMENT, "NULL err");

	// A message longer than the struct is cut at a character boundary and terminated.
	char *wide = malloc(3000);
	strcpy(wide, "rel");
	for (int i = 0; i < 1000; i++) {
		strcat(wide, "\xc3\xa9"); // é, two bytes
	}
	const char *wide_dirs[1] = {wide};
	spillway_error cut;
	memset(&cut, 'x', sizeof cut);
	CHECK(spillway_plan_create(wide_dirs, 1, 1, 1, &out, &cut) == SPILLWAY_ERR_INVALID_ARGUMENT, "relative dir");
	size_t cut_len = strnlen(cut.message, sizeof cut.message);
	CHECK(cut_len < sizeof cut.message && cut_len > sizeof cut.message - 4, "a message cut to %zu bytes", cut_len);
	CHECK((cut.message[cut_len - 1] & 0xC0) != 0xC0, "the message ends inside a character");
	free(wide);

	// Nothing changed by any of it.
	for (int i = 0; i < 4; i++) {
		CHECK(counter(unchanged[i]) == counters_before[i], "the failed calls changed %s: %lld, before %lld", unchanged[i],
		      (long long)counter(unchanged[i]), (long long)counters_before[i]);
	}
	int64_t used = 0, logical = 0;
	OK(spillway_plan_used_disk_space(plan, &used, E));
	OK(spillway_spill_file_size(unfinished, &logical, NULL, E));
	CHECK(used == used_before && logical == logical_before, "the failed calls changed the files");
	CHECK(entries(roots[0]) == entries_before, "dirs made by failed calls");
	OK(spillway_reader_close(reader, E));
	read_all(file, data, sizeof data, 7);

	// Double release of each kind.
	OK(spillway_reader_open(file, &reader, E));
	OK(spillway_reader_close(reader, E));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "reader", spillway_reader_close(reader, F));
	OK(spillway_spill_file_release(file, E));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "spill file", spillway_spill_file_release(file, F));
	OK(spillway_plan_release(plan, E));
	FAILS(SPILLWAY_ERR_INVALID_HANDLE, "plan", spillway_plan_release(plan, F));
	remove_root(roots[0]);
}

// With lz4 configured, new plans compress (the process's format, the JVM's too); plans made
// before keep theirs.
static void test_format(void) {
	current = "format";
	const char *roots[1] = {make_root(0, "format")};
	int64_t before_plan = 0, plan = 0, logical = 0, stored = 0;
	const int64_t n = 500 * 1000;
	uint8_t *data = malloc(n);
	fill(data, n, 11, 1);
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &before_plan, E));
	OK(spillway_configure_format("LZ4", 1, 1, 256, E));
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	int64_t file = write_file(plan, data, n);
	OK(spillway_spill_file_size(file, &logical, &stored, E));
	CHECK(logical == n && stored < n / 4, "lz4: %lld plain bytes stored in %lld", (long long)logical, (long long)stored);
	read_all(file, data, n, 1 << 16);
	int64_t old = write_file(before_plan, data, n);
	OK(spillway_spill_file_size(old, &logical, &stored, E));
	CHECK(stored > n, "a plan created before the format changed compressed: %lld", (long long)stored);
	read_all(old, data, n, 1 << 16);
	OK(spillway_configure_format("none", 1, 0, 128, E));
	OK(spillway_plan_release(plan, E));
	OK(spillway_plan_release(before_plan, E));
	free(data);
	remove_root(roots[0]);
}

// A real full disk (a tmpfs): the write that hits it fails with ERR_IO naming the OS cause; what
// was acknowledged before is intact and counted exactly, and once space is freed a new plan
// spills there again.
static void test_disk_full(const char *tmpfs) {
	current = "disk full";
	char root[4096];
	snprintf(root, sizeof root, "%.2000s/root", tmpfs);
	CHECK(mkdir(root, 0700) == 0, "mkdir %s: %s", root, strerror(errno));
	const char *roots[1] = {root};
	int64_t plan = 0, full = 0, used = 0, stored = 0, acked_stored = 0;
	const int64_t kept_n = 300 * 1000, piece = 100 * 1000;
	uint8_t *data = malloc(kept_n);
	fill(data, kept_n, 13, 0);
	int64_t fs_errors_before = counter("filesystemErrors");
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &plan, E));
	int64_t kept = write_file(plan, data, kept_n);
	OK(spillway_spill_file_create(plan, &full, E));
	int32_t rc = SPILLWAY_OK;
	spillway_error err;
	int64_t written = 0;
	for (int i = 0; i < 1000 && rc == SPILLWAY_OK; i++) {
		rc = spillway_spill_file_write(full, data, piece, &err);
		if (rc == SPILLWAY_OK) {
			written += piece;
			OK(spillway_spill_file_size(full, NULL, &acked_stored, E));
		}
	}
	CHECK(rc == SPILLWAY_ERR_IO, "filling the disk gave %d", (int)rc);
	CHECK(rc == SPILLWAY_OK || strstr(err.message, "no space left on device") != NULL, "message: %s", err.message);
	CHECK(written > 0, "nothing fitted before the disk was full");
	CHECK(counter("filesystemErrors") > fs_errors_before, "the failure was not counted");
	// Counted exactly: the plan's bytes are those on disk.
	OK(spillway_spill_file_size(full, NULL, &stored, E));
	OK(spillway_plan_used_disk_space(plan, &used, E));
	char path[4096];
	int64_t len = 0;
	struct stat st_full, st_kept;
	OK(spillway_spill_file_path(full, path, sizeof path, &len, E));
	CHECK(stat(path, &st_full) == 0, "stat %s", path);
	OK(spillway_spill_file_path(kept, path, sizeof path, &len, E));
	CHECK(stat(path, &st_kept) == 0, "stat %s", path);
	CHECK(used == st_full.st_size + st_kept.st_size, "used %lld, on disk %lld + %lld", (long long)used,
	      (long long)st_full.st_size, (long long)st_kept.st_size);
	CHECK(stored >= acked_stored, "stored shrank: %lld < %lld", (long long)stored, (long long)acked_stored);
	FAILS(SPILLWAY_ERR_IO, NULL, spillway_spill_file_write(full, data, 10, F)); // it takes no more writes
	// Nothing lost: the finished file reads back whole.
	read_all(kept, data, kept_n, 1 << 16);
	// Space freed, writing resumes in a new file.
	OK(spillway_spill_file_release(full, E));
	// The plan gave up the root that failed (the usual executor has others); a new plan uses it.
	int64_t again = 0, fresh = 0;
	FAILS(SPILLWAY_ERR_IO, "no local dir could take a spill file", spillway_spill_file_create(plan, &again, F));
	OK(spillway_plan_create(roots, 1, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &fresh, E));
	again = write_file(fresh, data, kept_n);
	read_all(again, data, kept_n, 1 << 16);
	OK(spillway_plan_release(fresh, E));
	OK(spillway_plan_release(plan, E));
	free(data);
	remove_root(root);
}

// Threads at once: each with plans of its own from one registration, and all writing files of
// one shared plan; every byte comes back, and the shared plan counts exactly what its files hold.
enum { THREADS = 4, ROUNDS = 20 };
static int64_t shared_plan, shared_dirs;

static void *concurrent_worker(void *arg) {
	int id = (int)(intptr_t)arg;
	uint8_t data[70000];
	fill(data, sizeof data, (uint32_t)id, id % 2);
	for (int round = 0; round < ROUNDS; round++) {
		int64_t own = 0;
		OK(spillway_plan_create_in(shared_dirs, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &own, E));
		int64_t mine = write_file(own, data, sizeof data);
		int64_t shared = write_file(shared_plan, data, sizeof data);
		read_all(mine, data, sizeof data, 4096);
		read_all(shared, data, sizeof data, 65536);
		OK(spillway_spill_file_release(shared, E));
		OK(spillway_plan_release(own, E));
	}
	return NULL;
}

static void test_concurrency(void) {
	current = "concurrency";
	const char *roots[2] = {make_root(0, "concurrent-a"), make_root(1, "concurrent-b")};
	OK(spillway_local_dirs_register(roots, 2, &shared_dirs, E));
	OK(spillway_plan_create_in(shared_dirs, SPILLWAY_UNLIMITED, SPILLWAY_UNLIMITED, &shared_plan, E));
	pthread_t threads[THREADS];
	for (int i = 0; i < THREADS; i++) {
		CHECK(pthread_create(&threads[i], NULL, concurrent_worker, (void *)(intptr_t)i) == 0, "pthread_create");
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(threads[i], NULL);
	}
	int64_t used = -1;
	OK(spillway_plan_used_disk_space(shared_plan, &used, E));
	CHECK(used == 0, "the shared plan counts %lld bytes with no file left", (long long)used);
	OK(spillway_plan_release(shared_plan, E));
	OK(spillway_local_dirs_release(shared_dirs, E));
	remove_root(roots[0]);
	remove_root(roots[1]);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: %s SCRATCH_DIR TMPFS_DIR\n", argv[0]);
		return 2;
	}
	snprintf(scratch, sizeof scratch, "%s", argv[1]);
	test_version();
	test_stats();
	test_lazy_dirs();
	test_registered_dirs();
	test_round_trip();
	test_plan_limit();
	test_executor_limit();
	test_release_removes_everything();
	test_concurrency();
	test_bad_inputs();
	test_format();
	test_disk_full(argv[2]);
	current = "end";
	CHECK(counter("livePlans") == 0, "%lld plans left", (long long)counter("livePlans"));
	CHECK(entries(scratch) == 0, "the scratch dir keeps %d entries", entries(scratch));
	if (failures > 0) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("C ABI tests passed\n");
	return 0;
}
