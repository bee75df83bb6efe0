/* Shared by the C API's test suite (tests/c_api_*_test.c, plain C11): the
 * CHECK macros, the store each test gets, and helpers and handlers several
 * tests use. tests/c_api_testing.c runs the tests: each IDEM_TEST is a
 * ctest test of its own, CApi.<Name> (tests/CMakeLists.txt); `c_api_test
 * <Name>` runs one, in a fresh temporary directory; `c_api_test` alone
 * runs them all. */

#ifndef IDEM_TESTS_C_API_TESTING_H_
#define IDEM_TESTS_C_API_TESTING_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/c.h"

/* The store path of the running test (a directory that does not exist yet,
 * inside the test's temporary directory). */
extern char store_path[300];

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
              __LINE__, #cond, idem_last_error());                            \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

#define CHECK_CODE(call, code)                                               \
  do {                                                                       \
    idem_code got_ = (call);                                                 \
    if (got_ != (code)) {                                                    \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, \
              __LINE__, #call, idem_code_name(got_), idem_code_name(code),   \
              idem_last_error());                                            \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

#define CHECK_OK(call) CHECK_CODE(call, IDEM_OK)

/* Declares and defines a test; the runner finds it by name. */
#define IDEM_TEST(name) \
  void name(void);      \
  void name(void)

/* Whether `needle` occurs in `haystack`. */
int contains(const char* haystack, const char* needle);
/* Opens store_path with `options` (NULL: the defaults); checks it opened. */
idem_engine* open_store(const idem_options* options);
/* A new message with ID `id`. */
idem_message* message_with_id(const char* id);
/* Processes a new message with ID `id` through `handler` and returns its
 * outcome (checking that the call succeeded). */
idem_outcome process_id(idem_engine* engine, const char* id,
                        idem_handler handler, void* user);
/* As process_id, for the message `m`, which it frees. */
idem_outcome process_message(idem_engine* engine, idem_message* m,
                             idem_handler handler, void* user);
/* The committed value of `key` as a NUL-terminated string, or NULL. Caller
 * frees with idem_free. */
char* state_of(idem_engine* engine, const char* key);

/* Counts its calls in *(int*)user, writes "k" = the message's payload, and
 * sets the result "r:<payload>". */
int put_payload(void* user, const idem_message* message, idem_txn* txn);
/* Adds 1 to the decimal counter "count", reading it through the txn;
 * counts its calls in *(int*)user unless user is NULL. */
int increment(void* user, const idem_message* message, idem_txn* txn);

#endif /* IDEM_TESTS_C_API_TESTING_H_ */
