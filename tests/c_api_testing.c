/* The C API suite's runner and shared helpers (tests/c_api_testing.h). */

#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */

#include "tests/c_api_testing.h"

#include <ftw.h>
#include <sys/stat.h>

char store_path[300];
static char store_dir[256];

static int remove_entry(const char* path, const struct stat* sb, int flag,
                        struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

int contains(const char* haystack, const char* needle) {
  return strstr(haystack, needle) != NULL;
}

idem_engine* open_store(const idem_options* options) {
  idem_engine* engine = NULL;
  CHECK_OK(idem_engine_open(store_path, options, &engine));
  CHECK(engine != NULL);
  return engine;
}

idem_message* message_with_id(const char* id) {
  idem_message* m = idem_message_new();
  CHECK(m != NULL);
  CHECK_OK(idem_message_set_id(m, id, strlen(id)));
  return m;
}

/* The committed value of `key` as a NUL-terminated string, or NULL. Caller
 * frees with idem_free. */
char* state_of(idem_engine* engine, const char* key) {
  char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_OK(
      idem_engine_get_state(engine, key, strlen(key), &value, &size, &found));
  CHECK(found == (value != NULL));
  return value;
}

idem_outcome process_id(idem_engine* engine, const char* id,
                        idem_handler handler, void* user) {
  return process_message(engine, message_with_id(id), handler, user);
}

idem_outcome process_message(idem_engine* engine, idem_message* m,
                             idem_handler handler, void* user) {
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, handler, user, &r));
  const idem_outcome outcome = idem_result_outcome(r);
  idem_result_free(r);
  idem_message_free(m);
  return outcome;
}

/* ---- Handlers ---- */

/* Counts its calls in *user, writes "k" = the message's payload, and sets
 * the result "r:<payload>". */
int put_payload(void* user, const idem_message* message, idem_txn* txn) {
  ++*(int*)user;
  size_t size = 0;
  const char* payload = idem_message_payload(message, &size);
  CHECK_OK(idem_txn_put(txn, "k", 1, payload, size));
  char result[64];
  int n = snprintf(result, sizeof result, "r:%.*s", (int)size, payload);
  CHECK_OK(idem_txn_set_result(txn, result, (size_t)n));
  return IDEM_HANDLER_COMMIT;
}

/* Adds 1 to the decimal counter "count", reading it through the txn. */
int increment(void* user, const idem_message* message, idem_txn* txn) {
  (void)message;
  if (user != NULL) ++*(int*)user;
  const char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_OK(idem_txn_get(txn, "count", 5, &value, &size, &found));
  long count = 0;
  if (found) {
    char buf[32] = {0};
    memcpy(buf, value, size < sizeof buf - 1 ? size : sizeof buf - 1);
    count = strtol(buf, NULL, 10);
  }
  char out[32];
  int n = snprintf(out, sizeof out, "%ld", count + 1);
  CHECK_OK(idem_txn_put(txn, "count", 5, out, (size_t)n));
  return IDEM_HANDLER_COMMIT;
}

/* ---- Runner ---- */

/* Every IDEM_TEST of the suite's files, listed by tests/CMakeLists.txt in
 * c_api_tests.inc as IDEM_TEST_CASE(Name) lines. */
#define IDEM_TEST_CASE(name) void name(void);
#include "c_api_tests.inc"
#undef IDEM_TEST_CASE

struct test_case {
  const char* name;
  void (*run)(void);
};

#define IDEM_TEST_CASE(name) {#name, name},
static const struct test_case tests[] = {
#include "c_api_tests.inc"
};
#undef IDEM_TEST_CASE

static void run_one(const struct test_case* t) {
  const char* tmp = getenv("TMPDIR");
  snprintf(store_dir, sizeof store_dir, "%s/idem_c_api_XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  CHECK(mkdtemp(store_dir) != NULL);
  snprintf(store_path, sizeof store_path, "%s/store", store_dir);
  t->run();
  nftw(store_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("[       OK ] CApi.%s\n", t->name);
}

int main(int argc, char** argv) {
  const size_t count = sizeof tests / sizeof tests[0];
  int ran = 0;
  for (size_t i = 0; i < count; ++i) {
    if (argc > 1 && strcmp(argv[1], tests[i].name) != 0) continue;
    run_one(&tests[i]);
    ++ran;
  }
  if (ran == 0) {
    fprintf(stderr, "c_api_test: no test named %s\n", argc > 1 ? argv[1] : "");
    return 1;
  }
  return 0;
}
