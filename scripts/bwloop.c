// bwloop: a plain multi-threaded memory read loop in C, the yardstick for
// ingot's bandwidth probe (kernels/cpu/bandwidth.go; docs/bench.md). It is a
// measurement tool, not part of the Go build.
//
// Build and run (Linux, gcc):
//
//	gcc -O3 -march=native -pthread -o /tmp/bwloop scripts/bwloop.c
//	/tmp/bwloop [-t threads] [-m MiB] [-p passes] [-k kind]
//
// Each of t threads sums its contiguous share of one buffer of m MiB (faulted in
// first), all threads start together at a barrier, and a pass is timed from
// before the barrier until the last thread is done; it prints each pass's GB/s
// (10^9 bytes per second) and their median. Kinds of loop:
//
//	plain  for (i...) s += p[i] over uint64, vectorized as gcc likes (default)
//	avx2   four independent 256-bit adds per 128 bytes
//	avx512 four independent 512-bit adds per 256 bytes
//	nt     avx512 with VMOVNTDQA (non-temporal) loads
//	pf     avx512 with PREFETCHT1 8 KiB ahead (the loop of ingot's probe)
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int nthreads = 2;
static size_t nbytes = (size_t)1 << 30;
static int passes = 9;
static const char *kind = "plain";
static uint8_t *buf;
static pthread_barrier_t start, done;
static volatile uint64_t sink;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t sum_plain(const uint64_t *p, size_t n) {
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += p[i];
	return s;
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	for (size_t i = 0; i + 128 <= n; i += 128) {
		a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + i)));
		b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
		c = _mm256_add_epi64(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
		d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
	}
	a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
	uint64_t r[4];
	_mm256_storeu_si256((__m256i *)r, a);
	return r[0] + r[1] + r[2] + r[3];
}

__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint8_t *p, size_t n, int nt, int pf) {
	__m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
	for (size_t i = 0; i + 256 <= n; i += 256) {
		if (pf) {
			_mm_prefetch((const char *)(p + i + 8192), _MM_HINT_T1);
			_mm_prefetch((const char *)(p + i + 8256), _MM_HINT_T1);
			_mm_prefetch((const char *)(p + i + 8320), _MM_HINT_T1);
			_mm_prefetch((const char *)(p + i + 8384), _MM_HINT_T1);
		}
		if (nt) {
			a = _mm512_add_epi64(a, _mm512_stream_load_si512((void *)(p + i)));
			b = _mm512_add_epi64(b, _mm512_stream_load_si512((void *)(p + i + 64)));
			c = _mm512_add_epi64(c, _mm512_stream_load_si512((void *)(p + i + 128)));
			d = _mm512_add_epi64(d, _mm512_stream_load_si512((void *)(p + i + 192)));
		} else {
			a = _mm512_add_epi64(a, _mm512_load_si512((const void *)(p + i)));
			b = _mm512_add_epi64(b, _mm512_load_si512((const void *)(p + i + 64)));
			c = _mm512_add_epi64(c, _mm512_load_si512((const void *)(p + i + 128)));
			d = _mm512_add_epi64(d, _mm512_load_si512((const void *)(p + i + 192)));
		}
	}
	return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
}

static void *worker(void *arg) {
	long id = (long)arg;
	size_t per = nbytes / nthreads / 4096 * 4096;
	const uint8_t *p = buf + id * per;
	for (int r = 0; r <= passes; r++) { // pass 0 is a warm-up
		pthread_barrier_wait(&start);
		uint64_t s;
		if (!strcmp(kind, "plain"))
			s = sum_plain((const uint64_t *)p, per / 8);
		else if (!strcmp(kind, "avx2"))
			s = sum_avx2(p, per);
		else if (!strcmp(kind, "avx512"))
			s = sum_avx512(p, per, 0, 0);
		else if (!strcmp(kind, "nt"))
			s = sum_avx512(p, per, 1, 0);
		else if (!strcmp(kind, "pf"))
			s = sum_avx512(p, per, 0, 1);
		else
			s = 0;
		sink += s;
		pthread_barrier_wait(&done);
	}
	return NULL;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	int c;
	while ((c = getopt(argc, argv, "t:m:p:k:")) != -1) {
		switch (c) {
		case 't': nthreads = atoi(optarg); break;
		case 'm': nbytes = (size_t)atol(optarg) << 20; break;
		case 'p': passes = atoi(optarg); break;
		case 'k': kind = optarg; break;
		default:
			fprintf(stderr, "usage: bwloop [-t threads] [-m MiB] [-p passes] [-k plain|avx2|avx512|nt|pf]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 256 || passes < 1 || passes > 1024 || nbytes < (size_t)nthreads * 4096) {
		fprintf(stderr, "bwloop: want 1 <= -t <= 256, 1 <= -p <= 1024 and -m at least 4 KiB a thread\n");
		return 2;
	}
	if (strcmp(kind, "plain") && strcmp(kind, "avx2") && strcmp(kind, "avx512") && strcmp(kind, "nt") && strcmp(kind, "pf")) {
		fprintf(stderr, "bwloop: -k %s: want plain, avx2, avx512, nt or pf\n", kind);
		return 2;
	}
	if (posix_memalign((void **)&buf, 4096, nbytes)) {
		perror("bwloop: posix_memalign");
		return 1;
	}
	memset(buf, 1, nbytes);
	size_t read = nbytes / nthreads / 4096 * 4096 * nthreads;
	pthread_barrier_init(&start, NULL, nthreads + 1);
	pthread_barrier_init(&done, NULL, nthreads + 1);
	pthread_t th[256];
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	double gbs[1024];
	for (int r = 0; r <= passes; r++) {
		double t0 = now();
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		double g = read / (now() - t0) / 1e9;
		if (r > 0)
			gbs[r - 1] = g;
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	int n = passes;
	printf("bwloop kind=%s threads=%d MiB=%zu GB/s:", kind, nthreads, nbytes >> 20);
	for (int i = 0; i < n; i++)
		printf(" %.1f", gbs[i]);
	qsort(gbs, n, sizeof gbs[0], cmp);
	printf(" median %.1f\n", gbs[n / 2]);
	return 0;
}
