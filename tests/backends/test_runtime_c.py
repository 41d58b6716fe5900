"""runtime_c and the platform hooks: a C test driver built on the host with ASan + UBSan, and
warning-free compiles of every C asset for the Cortex-M variants."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from aot.assets import asset_dir

RUNTIME = asset_dir("runtime_c")
PLATFORM = asset_dir("platform")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow", "-Wconversion"]

DRIVER = r"""
#include "aot_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static int checks = 0;
#define CHECK(cond) do { ++checks; if (!(cond)) { ++failures; \
    fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define ALIGNED(p, a) ((((uintptr_t)(p)) & ((uintptr_t)(a) - 1u)) == 0u)

static void test_error_names(void) {
    CHECK(strcmp(aot_error_name(AOT_OK), "AOT_OK") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_NULL_ARGUMENT), "AOT_ERR_NULL_ARGUMENT") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_ALLOCATION), "AOT_ERR_ALLOCATION") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_FREE_ORDER), "AOT_ERR_FREE_ORDER") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_POOL_TOO_SMALL), "AOT_ERR_POOL_TOO_SMALL") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_INTERNAL), "AOT_ERR_INTERNAL") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_INVALID_ARGUMENT), "AOT_ERR_INVALID_ARGUMENT") == 0);
    CHECK(strcmp(aot_error_name(AOT_ERR_SHAPE_MISMATCH), "AOT_ERR_SHAPE_MISMATCH") == 0);
    CHECK(strcmp(aot_error_name(12345), "AOT_ERR_UNKNOWN") == 0);
    CHECK(strcmp(aot_error_name(-99), "AOT_ERR_UNKNOWN") == 0);
    /* all codes distinct and negative */
    CHECK(AOT_ERR_NULL_ARGUMENT < 0 && AOT_ERR_ALLOCATION < 0 && AOT_ERR_FREE_ORDER < 0);
    CHECK(AOT_ERR_POOL_TOO_SMALL < 0 && AOT_ERR_INTERNAL < 0 && AOT_ERR_INVALID_ARGUMENT < 0);
    CHECK(AOT_ERR_NULL_ARGUMENT != AOT_ERR_ALLOCATION && AOT_ERR_ALLOCATION != AOT_ERR_FREE_ORDER);
    CHECK(AOT_ERR_FREE_ORDER != AOT_ERR_POOL_TOO_SMALL && AOT_ERR_POOL_TOO_SMALL != AOT_ERR_INTERNAL);
}

static void test_init_and_null_arguments(void) {
    aot_arena_t arena;
    void *p = (void *)&arena;
    uint8_t *mem = (uint8_t *)malloc(64);
    CHECK(aot_arena_init(NULL, mem, 64) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_arena_init(&arena, NULL, 64) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_arena_init(&arena, NULL, 0) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 1, 1, &p) == AOT_ERR_ALLOCATION);
    CHECK(p == NULL);
    CHECK(aot_arena_init(&arena, mem, 64) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 1, 1, NULL) == AOT_ERR_NULL_ARGUMENT);
    p = (void *)&arena;
    CHECK(aot_arena_alloc(NULL, 1, 1, &p) == AOT_ERR_NULL_ARGUMENT);
    CHECK(p == NULL);
    CHECK(aot_arena_free(NULL, mem) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_arena_free(&arena, NULL) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_arena_free(&arena, mem) == AOT_ERR_FREE_ORDER); /* nothing live */
    CHECK(aot_arena_reset(NULL) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_arena_high_water(NULL) == 0u);
    CHECK(aot_arena_used(NULL) == 0u);
    free(mem);
}

static void test_alignment(void) {
    enum { SIZE = 1 << 16 };
    uint8_t *mem = (uint8_t *)malloc(SIZE);
    aot_arena_t arena;
    size_t alignment;
    void *ptrs[14];
    int n = 0;
    void *p = NULL;

    CHECK(aot_arena_init(&arena, mem + 1, SIZE - 1) == AOT_OK); /* deliberately odd base */
    for (alignment = 1; alignment <= 4096; alignment *= 2) {
        CHECK(aot_arena_alloc(&arena, 3, alignment, &ptrs[n]) == AOT_OK);
        CHECK(ALIGNED(ptrs[n], alignment));
        CHECK(ALIGNED(ptrs[n], AOT_ARENA_MIN_ALIGN));
        memset(ptrs[n], 0xA5, 3);
        ++n;
    }
    CHECK(aot_arena_alloc(&arena, 8, 0, &p) == AOT_OK); /* 0 = default alignment */
    CHECK(ALIGNED(p, AOT_ARENA_MIN_ALIGN));
    CHECK(aot_arena_free(&arena, p) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 8, 3, &p) == AOT_ERR_INVALID_ARGUMENT);
    CHECK(aot_arena_alloc(&arena, 8, 48, &p) == AOT_ERR_INVALID_ARGUMENT);
    CHECK(p == NULL);
    while (n > 0) {
        --n;
        CHECK(aot_arena_free(&arena, ptrs[n]) == AOT_OK);
    }
    CHECK(aot_arena_used(&arena) == 0u);
    free(mem);
}

static void test_lifo_rules(void) {
    uint8_t *mem = (uint8_t *)malloc(256);
    aot_arena_t arena;
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    size_t used_ab;

    CHECK(aot_arena_init(&arena, mem, 256) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 10, 4, &a) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 20, 8, &b) == AOT_OK);
    used_ab = aot_arena_used(&arena);
    CHECK(aot_arena_alloc(&arena, 30, 16, &c) == AOT_OK);
    CHECK((uint8_t *)b >= (uint8_t *)a + 10 && (uint8_t *)c >= (uint8_t *)b + 20);
    CHECK(aot_arena_free(&arena, b) == AOT_ERR_FREE_ORDER); /* not the latest */
    CHECK(aot_arena_free(&arena, a) == AOT_ERR_FREE_ORDER);
    CHECK(aot_arena_free(&arena, (uint8_t *)c + 1) == AOT_ERR_FREE_ORDER); /* interior pointer */
    CHECK(arena.live == 3u); /* failed frees change nothing */
    CHECK(aot_arena_free(&arena, c) == AOT_OK);
    CHECK(aot_arena_used(&arena) == used_ab);
    CHECK(aot_arena_free(&arena, c) == AOT_ERR_FREE_ORDER); /* double free */
    /* the space of c is reused exactly */
    CHECK(aot_arena_alloc(&arena, 30, 16, &d) == AOT_OK);
    CHECK(d == c);
    CHECK(aot_arena_free(&arena, d) == AOT_OK);
    CHECK(aot_arena_free(&arena, b) == AOT_OK);
    CHECK(aot_arena_free(&arena, a) == AOT_OK);
    CHECK(aot_arena_free(&arena, a) == AOT_ERR_FREE_ORDER);
    CHECK(aot_arena_used(&arena) == 0u);
    CHECK(arena.live == 0u);
    free(mem);
}

static void test_exhaustion_and_high_water(void) {
    enum { SIZE = 128 };
    uint8_t *mem = (uint8_t *)malloc(SIZE); /* exact size: ASan catches any overrun */
    aot_arena_t arena;
    void *a = NULL, *b = NULL, *c = (void *)&arena;
    size_t used_a, hw;

    CHECK(aot_arena_init(&arena, mem, SIZE) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, SIZE, 1, &c) == AOT_ERR_ALLOCATION); /* header does not fit */
    CHECK(c == NULL);
    CHECK(aot_arena_alloc(&arena, 40, 8, &a) == AOT_OK);
    memset(a, 1, 40);
    used_a = aot_arena_used(&arena);
    CHECK(used_a <= AOT_ARENA_ALLOC_BOUND(40, 8));
    CHECK(aot_arena_alloc(&arena, (size_t)-1, 8, &c) == AOT_ERR_ALLOCATION); /* no overflow */
    CHECK(aot_arena_alloc(&arena, (size_t)-1 - 3, 1, &c) == AOT_ERR_ALLOCATION);
    CHECK(aot_arena_alloc(&arena, 1000, 8, &c) == AOT_ERR_ALLOCATION);
    CHECK(aot_arena_used(&arena) == used_a); /* failures change nothing */
    CHECK(arena.live == 1u);
    /* fill the rest exactly */
    CHECK(aot_arena_alloc(&arena, SIZE - used_a - AOT_ARENA_HEADER_BYTES, AOT_ARENA_MIN_ALIGN, &b) == AOT_OK);
    memset(b, 2, SIZE - used_a - AOT_ARENA_HEADER_BYTES);
    CHECK(aot_arena_used(&arena) == SIZE);
    CHECK(aot_arena_alloc(&arena, 0, 1, &c) == AOT_ERR_ALLOCATION);
    hw = aot_arena_high_water(&arena);
    CHECK(hw == SIZE);
    CHECK(aot_arena_free(&arena, b) == AOT_OK);
    CHECK(aot_arena_free(&arena, a) == AOT_OK);
    CHECK(aot_arena_high_water(&arena) == hw); /* kept after frees */
    CHECK(aot_arena_alloc(&arena, 0, 1, &c) == AOT_OK); /* zero bytes: unique, must be freed */
    CHECK(c != NULL);
    CHECK(aot_arena_free(&arena, c) == AOT_OK);
    CHECK(aot_arena_alloc(&arena, 8, 8, &a) == AOT_OK);
    CHECK(aot_arena_reset(&arena) == AOT_OK);
    CHECK(aot_arena_used(&arena) == 0u && arena.live == 0u);
    CHECK(aot_arena_free(&arena, a) == AOT_ERR_FREE_ORDER);
    CHECK(aot_arena_high_water(&arena) == hw);
    free(mem);
}

/* Random LIFO sequences: payloads never overlap, keep their contents, respect alignment
 * and the documented per-allocation bound. */
static void test_random_lifo(void) {
    enum { SIZE = 4096, DEPTH = 64 };
    uint8_t *mem = (uint8_t *)malloc(SIZE);
    aot_arena_t arena;
    uint8_t *ptr[DEPTH];
    size_t len[DEPTH];
    size_t bound_sum[DEPTH + 1];
    int depth = 0;
    uint32_t state = 12345u;
    int step;

    CHECK(aot_arena_init(&arena, mem, SIZE) == AOT_OK);
    bound_sum[0] = 0u;
    for (step = 0; step < 20000; ++step) {
        state = state * 1103515245u + 12345u;
        if (depth < DEPTH && ((state >> 16) & 3u) != 0u) {
            size_t n = (state >> 8) % 97u;
            size_t alignment = (size_t)1u << ((state >> 20) % 7u);
            void *p = NULL;
            int32_t rc = aot_arena_alloc(&arena, n, alignment, &p);
            if (rc == AOT_OK) {
                CHECK(ALIGNED(p, alignment));
                memset(p, depth & 0xFF, n);
                ptr[depth] = (uint8_t *)p;
                len[depth] = n;
                bound_sum[depth + 1] = bound_sum[depth] + AOT_ARENA_ALLOC_BOUND(n, alignment);
                ++depth;
                CHECK(aot_arena_used(&arena) <= bound_sum[depth]);
            } else {
                CHECK(rc == AOT_ERR_ALLOCATION);
                CHECK(bound_sum[depth] + AOT_ARENA_ALLOC_BOUND(n, alignment) > SIZE);
            }
        } else if (depth > 0) {
            size_t i;
            --depth;
            for (i = 0; i < len[depth]; ++i) {
                if (ptr[depth][i] != (uint8_t)(depth & 0xFF)) {
                    CHECK(!"allocation contents were overwritten");
                    break;
                }
            }
            if (depth > 0) {
                CHECK(aot_arena_free(&arena, ptr[depth - 1]) == AOT_ERR_FREE_ORDER);
            }
            CHECK(aot_arena_free(&arena, ptr[depth]) == AOT_OK);
        }
        CHECK(arena.live == (size_t)depth);
        CHECK(aot_arena_high_water(&arena) >= aot_arena_used(&arena));
    }
    free(mem);
}

static void test_host_platform(void) {
    size_t alignment;
    void *p = (void *)&alignment;
    void *ptrs[8];
    int n = 0;
    for (alignment = 1; alignment <= 128; alignment *= 2) {
        CHECK(aot_platform_allocate(100, alignment, &ptrs[n]) == AOT_OK);
        CHECK(ALIGNED(ptrs[n], alignment));
        memset(ptrs[n], 0x5A, 100);
        ++n;
    }
    /* any free order on the host */
    CHECK(aot_platform_free(ptrs[3]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[0]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[7]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[1]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[2]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[4]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[5]) == AOT_OK);
    CHECK(aot_platform_free(ptrs[6]) == AOT_OK);
    CHECK(aot_platform_allocate(0, 0, &p) == AOT_OK);
    CHECK(p != NULL);
    CHECK(aot_platform_free(p) == AOT_OK);
    CHECK(aot_platform_allocate(8, 12, &p) == AOT_ERR_INVALID_ARGUMENT);
    CHECK(p == NULL);
    CHECK(aot_platform_allocate(8, 8, NULL) == AOT_ERR_NULL_ARGUMENT);
    CHECK(aot_platform_allocate((size_t)-1, 8, &p) == AOT_ERR_ALLOCATION);
    CHECK(aot_platform_free(NULL) == AOT_ERR_NULL_ARGUMENT);
    aot_platform_log("aot_platform_log reached stderr\n");
}

int main(void) {
    test_error_names();
    test_init_and_null_arguments();
    test_alignment();
    test_lifo_rules();
    test_exhaustion_and_high_water();
    test_random_lifo();
    test_host_platform();
    printf("checks=%d failures=%d\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
"""


def _host_cc() -> str:
    for cc in ("gcc", "cc", "clang"):
        if shutil.which(cc):
            return cc
    pytest.fail("no host C compiler: run `make setup`")


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("runtime_c")
    src = work / "driver.c"
    src.write_text(DRIVER)
    exe = work / "driver"
    cmd = [
        _host_cc(), *STRICT[:4], "-g", "-O1", "-fno-omit-frame-pointer",
        "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
        f"-I{RUNTIME / 'include'}",
        str(RUNTIME / "src" / "aot_runtime.c"),
        str(PLATFORM / "host" / "aot_platform_host.c"),
        str(src), "-o", str(exe),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def test_runtime_and_host_platform_under_sanitizers(driver):
    proc = subprocess.run([str(driver)], capture_output=True, text=True, timeout=60,
                          env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "failures=0" in proc.stdout
    checks = int(proc.stdout.split("checks=")[1].split()[0])
    assert checks > 1000  # the random LIFO test ran
    assert "aot_platform_log reached stderr\n" in proc.stderr
    assert "runtime error" not in proc.stderr  # UBSan


def test_runtime_sources_compile_strictly_on_host(tmp_path):
    sources = [RUNTIME / "src" / "aot_runtime.c", PLATFORM / "host" / "aot_platform_host.c"]
    for src in sources:
        proc = subprocess.run(
            [_host_cc(), *STRICT, "-O2", f"-I{RUNTIME / 'include'}", "-c", str(src),
             "-o", str(tmp_path / (src.stem + ".o"))],
            capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr


CORTEX_M_VARIANTS = [
    ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
    ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"],
    ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
    ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"],
    ["-mcpu=cortex-m55", "-mthumb", "-mfpu=auto", "-mfloat-abi=hard"],
]


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("cpu_flags", CORTEX_M_VARIANTS, ids=lambda f: f[0].split("=")[1])
@pytest.mark.parametrize("defines", [["-DAOT_PLATFORM_ARENA_BYTES=0"],
                                     ["-DAOT_PLATFORM_ARENA_BYTES=1024", "-DAOT_FAULT_EXIT=3"]],
                         ids=["no-arena", "arena-fault-exit"])
def test_cortex_m_sources_compile_strictly(tmp_path, cpu_flags, defines):
    sources = [
        RUNTIME / "src" / "aot_runtime.c",
        PLATFORM / "cortex_m" / "aot_platform_cortex_m.c",
        PLATFORM / "common" / "aot_platform_arena.c",
        PLATFORM / "cortex_m" / "startup.c",
    ]
    for src in sources:
        proc = subprocess.run(
            ["arm-none-eabi-gcc", *cpu_flags, *STRICT, "-O2", "-ffunction-sections",
             *defines,
             f"-I{RUNTIME / 'include'}", f"-I{PLATFORM / 'cortex_m'}", f"-I{PLATFORM / 'common'}",
             "-c", str(src), "-o", str(tmp_path / (src.stem + ".o"))],
            capture_output=True, text=True,
        )
        assert proc.returncode == 0, f"{src.name}: {proc.stderr}"


def test_header_is_self_contained_and_cxx_compatible(tmp_path):
    src = tmp_path / "only_header.c"
    src.write_text('#include "aot_runtime.h"\nint f(void) { return AOT_OK + (int)sizeof(aot_arena_t); }\n')
    proc = subprocess.run([_host_cc(), *STRICT, f"-I{RUNTIME / 'include'}", "-c", str(src),
                           "-o", str(tmp_path / "h.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("g++"):
        cpp = tmp_path / "only_header.cpp"
        cpp.write_text('#include "aot_runtime.h"\nint f() { return aot_error_name(AOT_OK)[0]; }\n')
        proc = subprocess.run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror",
                               f"-I{RUNTIME / 'include'}", "-c", str(cpp), "-o", str(tmp_path / "hpp.o")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


# ---- aot_intrinsics.h: the scalar intrinsics every C model library includes -------------------
INTRINSICS_H = RUNTIME / "include" / "aot_intrinsics.h"


def test_abi_error_codes_match_runtime_header():
    """aot.artifact.abi's error codes (the LLVM backend returns them as numbers) are the ones
    aot_runtime.h defines."""
    import re
    from aot.artifact.abi import ERROR_CODES
    text = (RUNTIME / "include" / "aot_runtime.h").read_text()
    defined = {m[0]: int(m[1]) for m in re.findall(r"#define (AOT_OK|AOT_ERR_\w+) \(?(-?\d+)\)?", text)}
    assert defined == ERROR_CODES


def _intrinsic_cases() -> dict[str, list[tuple[int, ...]]]:
    """Arguments for every integer intrinsic: edge values and seeded random ones, in the domain
    the specification (aot/kernel/intrinsics.py) defines."""
    import itertools
    import random
    from aot.kernel.intrinsics import INTRINSICS
    rng = random.Random(12)
    edges = [0, 1, -1, 2, -2, 127, -128, 128, -129, 255, 32767, -32768, 65535, 1 << 30, -(1 << 30),
             (1 << 31) - 1, -(1 << 31), 0x7F80FF01, -0x12345678]

    def i32() -> int:
        return rng.choice(edges) if rng.random() < 0.3 else rng.randint(-(1 << 31), (1 << 31) - 1)

    shift_arg = {"rdbpot": (1, range(0, 32)), "requantize": (2, range(-31, 32)), "requant_q31": (4, range(0, 32)),
                 "requantize64": (2, range(-31, 8)), "requant_mm": (3, range(0, 32)),
                 "requant_mm_nn": (3, range(0, 32)), "requant_mma": (3, range(0, 32))}
    cases: dict[str, list[tuple[int, ...]]] = {}
    for name, d in INTRINSICS.items():
        if d.dtype != "i32" or any(t[0] in "&*" for t in d.arg_dtypes):  # scalar ones (not the vector routines)
            continue
        n = len(d.arg_dtypes)
        args = [tuple(c) for c in itertools.product(edges[:8], repeat=n)][:200]
        args += [tuple(i32() for _ in range(n)) for _ in range(400)]
        if name in shift_arg:
            k, allowed = shift_arg[name]
            args = [a[:k] + (rng.choice(allowed) if a[k] not in allowed else a[k],) + a[k + 1:] for a in args]
        cases[name] = args
    return cases


def test_intrinsics_header_matches_the_specification_on_host(tmp_path):
    """The portable C of aot_intrinsics.h (the host has no DSP extension) computes what
    aot/kernel/intrinsics.py specifies, with no undefined behaviour (UBSan)."""
    from aot.kernel.intrinsics import INTRINSICS
    cases = _intrinsic_cases()
    assert {"srdhm", "requantize", "smlad", "sxtab16_ror8", "ssat8", "requant_q31"} <= set(cases)
    lines = ['#include <inttypes.h>', '#include <stdio.h>', '#include "aot_intrinsics.h"', "int main(void) {"]
    for name, args in cases.items():
        table = ", ".join("{" + ", ".join(f"(int32_t){a}" if a != -(1 << 31) else "INT32_MIN" for a in row) + "}"
                          for row in args)
        n = len(args[0])
        lines += [f"    {{ static const int32_t a[][{n}] = {{{table}}};",
                  f"      for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); ++i) {{",
                  f"        printf(\"{name} %\" PRId32 \"\\n\", aot_{name}({', '.join(f'a[i][{j}]' for j in range(n))}));",
                  "    } }"]
    floats = [0.0, 0.5, -0.5, 1.5, -2.5, 2.4999998, 1e9, -7.25, 3.0]
    lines += [f"    printf(\"roundf %.9g\\n\", (double)aot_roundf({v!r}f));" for v in floats]
    lines += ["    return 0;", "}"]
    src = tmp_path / "intrinsics.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "intrinsics"
    proc = subprocess.run([_host_cc(), *STRICT[:4], "-O2", "-fsanitize=undefined", "-fno-sanitize-recover=all",
                           f"-I{RUNTIME / 'include'}", str(src), "-lm", "-o", str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr
    got = run.stdout.splitlines()
    want = [f"{name} {INTRINSICS[name].py(*a)}" for name, args in cases.items() for a in args]
    want += [f"roundf {float(INTRINSICS['roundf'].py(v)):.9g}" for v in floats]
    assert len(got) == len(want)
    wrong = [(g, w) for g, w in zip(got, want) if g != w]
    assert not wrong, wrong[:10]


def _all_intrinsic_calls() -> str:
    from aot.kernel.intrinsics import INTRINSICS
    calls = []
    for name, d in INTRINSICS.items():
        if any(t[0] in "&*" for t in d.arg_dtypes):  # the vector routines over buffers: tests/ops/test_schedules_helium.py
            continue
        ctype = "float" if d.dtype == "f32" else "int32_t"
        args = ", ".join(("x" if t == "f32" else "a") if j == 0 else ("b" if t != "f32" else "x")
                         for j, t in enumerate(d.arg_dtypes))
        calls.append(f"    acc += ({ctype})aot_{name}({args});")
    return ('#include "aot_intrinsics.h"\n'
            "float use_all(int32_t a, int32_t b, float x);\n"
            "float use_all(int32_t a, int32_t b, float x) {\n    float acc = 0.0f;\n"
            + "\n".join(c.replace("acc += (int32_t)", "acc += (float)") for c in calls)
            + "\n    acc += (float)aot_min_i32(a, b) + (float)aot_max_i64(a, b) + aot_min_f32(x, AOT_F32_INF);\n"
            "    return acc + (float)aot_load_word(&a);\n}\n")


def test_intrinsics_header_compiles_strictly_on_host(tmp_path):
    src = tmp_path / "use_all.c"
    src.write_text(_all_intrinsic_calls())
    proc = subprocess.run([_host_cc(), *STRICT, "-O2", f"-I{RUNTIME / 'include'}", "-c", str(src),
                           "-o", str(tmp_path / "use_all.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


DSP_VARIANTS = [  # (flags, has the DSP extension)
    (["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"], False),
    (["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"], False),
    (["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"], True),
    (["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"], True),
    (["-mcpu=cortex-m33+nodsp", "-mthumb", "-mfloat-abi=soft"], False),
    (["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"], True),
    (["-mcpu=cortex-m55", "-mthumb", "-mfpu=auto", "-mfloat-abi=hard"], True),
]


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("cpu_flags,dsp", DSP_VARIANTS, ids=lambda v: v[0].split("=")[1] if isinstance(v, list) else "")
def test_intrinsics_header_compiles_strictly_for_cortex_m(tmp_path, cpu_flags, dsp):
    """Warning-free on every core; the DSP instructions are used exactly where the core has them."""
    src = tmp_path / "use_all.c"
    src.write_text(_all_intrinsic_calls())
    obj = tmp_path / "use_all.o"
    # without -Wconversion: the signedness of ACLE's lane types (arm_acle.h) differs between
    # toolchain versions, and the header's casts must suit all of them
    flags = [f for f in STRICT if f != "-Wconversion"]
    proc = subprocess.run(["arm-none-eabi-gcc", *cpu_flags, *flags, "-O2", f"-I{RUNTIME / 'include'}",
                           "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    for mnemonic in ("smlad", "sxtab16", "sxtb16"):
        assert (f"\t{mnemonic}" in text) == dsp, (mnemonic, cpu_flags)
