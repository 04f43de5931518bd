/* The check macros of the C API tests (test_c_api.c, test_c_abi_compat.c): each counts a check
 * and, when it fails, prints the location, the expression and fkv_last_error(). The including
 * file prints the counts ("N checks, M failed") and exits non-zero on a failure. C99. */
#ifndef FKV_TESTS_C_CHECK_H
#define FKV_TESTS_C_CHECK_H

#include <stdio.h>
#include <string.h>

#include "fkv/fkv.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    ++checks;                                                                                   \
    if (!(cond)) {                                                                              \
      ++failures;                                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  last error: %s\n", __FILE__, __LINE__, #cond, \
              fkv_last_error());                                                                \
    }                                                                                           \
  } while (0)

#define CHECK_STATUS(expr, expected)                                                              \
  do {                                                                                            \
    fkv_status s_ = (expr);                                                                       \
    ++checks;                                                                                     \
    if (s_ != (expected)) {                                                                       \
      ++failures;                                                                                 \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n  last error: %s\n", __FILE__,         \
              __LINE__, #expr, fkv_status_name(s_), fkv_status_name(expected), fkv_last_error()); \
    }                                                                                             \
  } while (0)

#define CHECK_CONTAINS(needle)                                                                  \
  do {                                                                                          \
    ++checks;                                                                                   \
    if (strstr(fkv_last_error(), (needle)) == NULL) {                                           \
      ++failures;                                                                               \
      fprintf(stderr, "%s:%d: last error does not contain \"%s\":\n  %s\n", __FILE__, __LINE__, \
              (needle), fkv_last_error());                                                      \
    }                                                                                           \
  } while (0)

#endif
