// The cost of a plan that never spills through the C ABI: create + release, with the dirs
// registered once (spillway_plan_create_in, as an engine creating many plans does) and with the
// dir strings converted on every plan (spillway_plan_create); from 1 and 2 threads, 1 and 8 roots.
// make bench-c runs it beside the same operations on plan.Registry in Go (BenchmarkCreateReleasePlan*).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spillway.h"

enum { MAX_ROOTS = 8 };

static const char *roots[MAX_ROOTS];
static int n_roots;
static int64_t dirs;
static int use_registration;
static long iterations;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *loop(void *arg) {
	(void)arg;
	spillway_error err;
	for (long i = 0; i < iterations; i++) {
		int64_t plan = 0;
		int32_t rc = use_registration
		                 ? spillway_plan_create_in(dirs, INT64_C(100) << 30, SPILLWAY_UNLIMITED, &plan, &err)
		                 : spillway_plan_create(roots, n_roots, INT64_C(100) << 30, SPILLWAY_UNLIMITED, &plan, &err);
		if (rc != SPILLWAY_OK || spillway_plan_release(plan, &err) != SPILLWAY_OK) {
			fprintf(stderr, "bench: %s\n", err.message);
			exit(1);
		}
	}
	return NULL;
}

// run returns the ns per create + release of the best of 5 runs with threads threads.
static double run(int threads) {
	double best = 0;
	for (int r = 0; r < 5; r++) {
		pthread_t ts[8];
		double start = now();
		for (int t = 0; t < threads; t++) {
			pthread_create(&ts[t], NULL, loop, NULL);
		}
		for (int t = 0; t < threads; t++) {
			pthread_join(ts[t], NULL);
		}
		double ns = (now() - start) / ((double)iterations * threads);
		if (r == 0 || ns < best) {
			best = ns;
		}
	}
	return best;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: %s SCRATCH_DIR ITERATIONS\n", argv[0]);
		return 2;
	}
	iterations = atol(argv[2]);
	static char paths[MAX_ROOTS][4096];
	for (int i = 0; i < MAX_ROOTS; i++) {
		snprintf(paths[i], sizeof paths[i], "%.4000s/root%d", argv[1], i); // never created: no plan spills
		roots[i] = paths[i];
	}
	n_roots = 1;
	loop(NULL); // warm up, converting the dirs each time
	printf("C ABI, never-spilling plan create + release (best of 5 runs of %ld per thread), ns/op:\n", iterations);
	printf("%-40s %8s %8s\n", "", "1 thread", "2 threads");
	const int counts[2] = {1, 8};
	for (int c = 0; c < 2; c++) {
		n_roots = counts[c];
		spillway_error err;
		if (spillway_local_dirs_register(roots, n_roots, &dirs, &err) != SPILLWAY_OK) {
			fprintf(stderr, "bench: %s\n", err.message);
			return 1;
		}
		for (use_registration = 1; use_registration >= 0; use_registration--) {
			char name[64];
			snprintf(name, sizeof name, "%s roots=%d", use_registration ? "spillway_plan_create_in" : "spillway_plan_create",
			         n_roots);
			double one = run(1), two = run(2);
			printf("%-40s %8.1f %8.1f\n", name, one, two);
		}
		spillway_local_dirs_release(dirs, &err);
	}
	int64_t live = -1, dirs_created = -1;
	spillway_error err;
	if (spillway_stats_value("livePlans", &live, &err) != SPILLWAY_OK ||
	    spillway_stats_value("dirsCreated", &dirs_created, &err) != SPILLWAY_OK || live != 0 || dirs_created != 0) {
		fprintf(stderr, "bench: plans left or dirs created\n");
		return 1;
	}
	return 0;
}
