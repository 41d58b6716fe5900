/* GNU names of the soft-float routines for ARMv6-M (Cortex-M0/M0+).
 *
 * LLVM's Arm code generator (as driven through llvmlite) calls the GNU libgcc names of the
 * soft-float routines (__mulsf3, __floatsisf, ...) also for thumbv6m-none-eabi, but the
 * arm-none-eabi libgcc for v6-m defines only their AEABI names (__aeabi_fmul, __aeabi_i2f, ...).
 * Each function below is that operation in C, which gcc compiles to the AEABI call; with
 * -ffunction-sections and --gc-sections only the ones a model calls are kept. ARMv7-M libgcc
 * defines the GNU names itself, so this file is empty there (no duplicate definitions). */
#if defined(__ARM_ARCH_6M__) && !defined(__ARM_FP)
#include <stdint.h>

float __addsf3(float a, float b);
float __subsf3(float a, float b);
float __mulsf3(float a, float b);
float __divsf3(float a, float b);
float __floatsisf(int32_t a);
float __floatunsisf(uint32_t a);
int32_t __fixsfsi(float a);
double __adddf3(double a, double b);
double __subdf3(double a, double b);
double __muldf3(double a, double b);
double __divdf3(double a, double b);
double __floatsidf(int32_t a);
double __floatunsidf(uint32_t a);
int32_t __fixdfsi(double a);
double __extendsfdf2(float a);
float __truncdfsf2(double a);

float __addsf3(float a, float b) { return a + b; }
float __subsf3(float a, float b) { return a - b; }
float __mulsf3(float a, float b) { return a * b; }
float __divsf3(float a, float b) { return a / b; }
float __floatsisf(int32_t a) { return (float)a; }
float __floatunsisf(uint32_t a) { return (float)a; }
int32_t __fixsfsi(float a) { return (int32_t)a; }
double __adddf3(double a, double b) { return a + b; }
double __subdf3(double a, double b) { return a - b; }
double __muldf3(double a, double b) { return a * b; }
double __divdf3(double a, double b) { return a / b; }
double __floatsidf(int32_t a) { return (double)a; }
double __floatunsidf(uint32_t a) { return (double)a; }
int32_t __fixdfsi(double a) { return (int32_t)a; }
double __extendsfdf2(float a) { return (double)a; }
float __truncdfsf2(double a) { return (float)a; }
/* comparisons: libgcc for v6-m defines __eqsf2, __lesf2, ... itself (its __aeabi_fcmp* call them,
   so defining them here in C would recurse), but not the "unordered" ones; they are its
   __aeabi_fcmpun / __aeabi_dcmpun under the GNU name (fuzz finding crash_bf9f856627: LESS_EQUAL
   on a float32 model for microbit called __unordsf2). */
int __aeabi_fcmpun(float a, float b);
int __aeabi_dcmpun(double a, double b);
int __unordsf2(float a, float b);
int __unordsf2(float a, float b) { return __aeabi_fcmpun(a, b); }
int __unorddf2(double a, double b);
int __unorddf2(double a, double b) { return __aeabi_dcmpun(a, b); }
#else
typedef int aot_softfloat_armv6m_unused; /* ISO C: a translation unit must not be empty */
#endif
