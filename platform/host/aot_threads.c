/*
 * microaot host thread pool: aot_parallel_for, called by the x86-64 host routines
 * (runtime_c/include/aot_x86.h, aot/llvm/x86.py) of a model built with aot.build(..., threads=N).
 * Host only (POSIX threads): it lives in platform/host, never in a microcontroller build, and
 * does nothing until a routine asks for more than one thread (off by default).
 *
 * aot_parallel_for(fn, ctx, n, threads) splits [0, n) into `chunks` = min(n, 4 * threads)
 * contiguous ranges (chunk i: [n*i/chunks, n*(i+1)/chunks)) and returns when every chunk has
 * run: the calling thread and up to threads - 1 workers (created on first use, kept for the
 * process) take chunks one at a time from a shared counter. A worker that is not scheduled in
 * time takes none (the caller runs them), so a loaded machine costs at most the one-thread time
 * plus the chunks in flight. The chunk bounds never depend on timing, and each output is
 * computed by the same operations whichever thread runs its chunk: the results are the same
 * bit for bit as with one thread. Workers spin briefly between jobs (the layers of one
 * inference follow each other closely), then sleep on a condition variable. One job runs at a
 * time (a mutex): two threads running models at once take turns.
 *
 * The job's state is one 64-bit word: generation (32 bits), next chunk (16), chunk count (16);
 * a chunk is taken by compare-and-swap on it, so a worker waking late can never take a chunk of
 * a finished job (its generation or count no longer matches) and reads the job's fields only
 * while one of its chunks is taken (the caller rewrites them only after every chunk is done).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#define AOT_MAX_THREADS 64
#define AOT_MAX_CHUNKS 0xFFFF
#define AOT_SPIN 20000

typedef void (*aot_task_fn)(void *ctx, int32_t lo, int32_t hi);

int32_t aot_parallel_for(aot_task_fn fn, void *ctx, int32_t n, int32_t threads);

static struct {
    pthread_mutex_t job;  /* one job at a time */
    pthread_mutex_t mu;   /* with cv: sleeping workers */
    pthread_cond_t cv;
    uint64_t state;       /* gen << 32 | next << 16 | chunks (atomic) */
    uint32_t done;        /* chunks finished in the current job (atomic) */
    int32_t workers;      /* workers started (changed under `job`) */
    aot_task_fn fn;       /* the current job: written before its state is published */
    void *ctx;
    int32_t n;
} aot_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0};

static inline void aot_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* take and run chunks of generation gen until none is left */
static void aot_take_chunks(uint32_t gen) {
    for (;;) {
        uint64_t s = __atomic_load_n(&aot_pool.state, __ATOMIC_ACQUIRE);
        for (;;) {
            const uint32_t next = (uint32_t)(s >> 16) & 0xFFFFu, chunks = (uint32_t)s & 0xFFFFu;
            if ((uint32_t)(s >> 32) != gen || next >= chunks) return;
            if (__atomic_compare_exchange_n(&aot_pool.state, &s, s + (1u << 16), 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                const int64_t n = aot_pool.n;
                const int32_t lo = (int32_t)(n * next / chunks), hi = (int32_t)(n * (next + 1) / chunks);
                if (lo < hi) aot_pool.fn(aot_pool.ctx, lo, hi);
                __atomic_add_fetch(&aot_pool.done, 1u, __ATOMIC_ACQ_REL);
                break;
            }
        }
    }
}

static void *aot_worker(void *arg) {
    uint32_t seen = (uint32_t)(uintptr_t)arg;  /* the generation before this worker's first job */
    for (;;) {
        uint32_t g;
        int32_t spins = 0;
        while ((g = (uint32_t)(__atomic_load_n(&aot_pool.state, __ATOMIC_ACQUIRE) >> 32)) == seen) {
            if (++spins < AOT_SPIN) {
                aot_cpu_relax();
                continue;
            }
            pthread_mutex_lock(&aot_pool.mu);
            while ((g = (uint32_t)(__atomic_load_n(&aot_pool.state, __ATOMIC_ACQUIRE) >> 32)) == seen) {
                pthread_cond_wait(&aot_pool.cv, &aot_pool.mu);
            }
            pthread_mutex_unlock(&aot_pool.mu);
            break;
        }
        seen = g;
        aot_take_chunks(g);
    }
    return 0;
}

int32_t aot_parallel_for(aot_task_fn fn, void *ctx, int32_t n, int32_t threads) {
    if (threads > AOT_MAX_THREADS) threads = AOT_MAX_THREADS;
    int64_t chunks = (int64_t)threads * 4;
    if (chunks > n) chunks = n;
    if (chunks > AOT_MAX_CHUNKS) chunks = AOT_MAX_CHUNKS;
    if (threads <= 1 || chunks <= 1) {
        if (n > 0) fn(ctx, 0, n);
        return 0;
    }
    pthread_mutex_lock(&aot_pool.job);
    const uint32_t gen = (uint32_t)(__atomic_load_n(&aot_pool.state, __ATOMIC_ACQUIRE) >> 32) + 1u;
    while (aot_pool.workers < threads - 1) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&tid, &attr, aot_worker, (void *)(uintptr_t)(gen - 1u));
        pthread_attr_destroy(&attr);
        if (rc != 0) break;  /* fewer workers: the caller takes more chunks */
        ++aot_pool.workers;
    }
    aot_pool.fn = fn;
    aot_pool.ctx = ctx;
    aot_pool.n = n;
    __atomic_store_n(&aot_pool.done, 0u, __ATOMIC_RELAXED);
    pthread_mutex_lock(&aot_pool.mu);
    __atomic_store_n(&aot_pool.state, ((uint64_t)gen << 32) | (uint64_t)chunks, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&aot_pool.cv);
    pthread_mutex_unlock(&aot_pool.mu);
    aot_take_chunks(gen);
    int32_t spins = 0;
    while (__atomic_load_n(&aot_pool.done, __ATOMIC_ACQUIRE) != (uint32_t)chunks) {
        if (++spins < 1000) {
            aot_cpu_relax();
        } else {
            sched_yield();  /* a worker holding a chunk may share this core */
        }
    }
    pthread_mutex_unlock(&aot_pool.job);
    return 0;
}
