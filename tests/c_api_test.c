/* The C API (include/idem/c.h, c/), tested from plain C11: every call,
 * with its failure paths. Each IDEM_TEST is a ctest test of its own
 * (CApi.<Name>, tests/CMakeLists.txt): `c_api_test <Name>` runs one, in a
 * fresh temporary directory; `c_api_test` alone runs them all. */

#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */

#include "idem/c.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "idem/version.h"

/* ---- A small test runner ---- */

static char store_dir[256];
static char store_path[300];

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n",      \
              __FILE__, __LINE__, #cond, idem_last_error());             \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

#define CHECK_CODE(call, code)                                            \
  do {                                                                    \
    idem_code got_ = (call);                                              \
    if (got_ != (code)) {                                                 \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n",        \
              __FILE__, __LINE__, #call, idem_code_name(got_),            \
              idem_code_name(code), idem_last_error());                   \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

#define CHECK_OK(call) CHECK_CODE(call, IDEM_OK)

#define IDEM_TEST(name) static void name(void)

static int remove_entry(const char* path, const struct stat* sb, int flag,
                        struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int contains(const char* haystack, const char* needle) {
  return strstr(haystack, needle) != NULL;
}

static idem_engine* open_store(const idem_options* options) {
  idem_engine* engine = NULL;
  CHECK_OK(idem_engine_open(store_path, options, &engine));
  CHECK(engine != NULL);
  return engine;
}

static idem_message* message_with_id(const char* id) {
  idem_message* m = idem_message_new();
  CHECK(m != NULL);
  CHECK_OK(idem_message_set_id(m, id, strlen(id)));
  return m;
}

/* The committed value of `key` as a NUL-terminated string, or NULL. Caller
 * frees with idem_free. */
static char* state_of(idem_engine* engine, const char* key) {
  char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_OK(idem_engine_get_state(engine, key, strlen(key), &value, &size,
                                 &found));
  CHECK(found == (value != NULL));
  return value;
}

/* ---- Handlers ---- */

/* Counts its calls in *user, writes "k" = the message's payload, and sets
 * the result "r:<payload>". */
static int put_payload(void* user, const idem_message* message,
                       idem_txn* txn) {
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
static int increment(void* user, const idem_message* message, idem_txn* txn) {
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

static int return_five(void* user, const idem_message* message,
                       idem_txn* txn) {
  (void)message;
  ++*(int*)user;
  CHECK_OK(idem_txn_put(txn, "k", 1, "v", 1));
  return 5;
}

static int fail_with_error(void* user, const idem_message* message,
                           idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_set_error(txn, IDEM_UNAVAILABLE, "ledger offline"));
  return 1;
}

static int fail_permanently(void* user, const idem_message* message,
                            idem_txn* txn) {
  (void)message;
  ++*(int*)user;
  CHECK_OK(idem_txn_put(txn, "k", 1, "v", 1));
  CHECK_OK(idem_txn_set_error(txn, IDEM_INVALID_ARGUMENT, "bad amount"));
  return IDEM_HANDLER_PERMANENT;
}

/* Keeps its txn in *user. */
static int keep_txn(void* user, const idem_message* message, idem_txn* txn) {
  (void)message;
  *(idem_txn**)user = txn;
  return IDEM_HANDLER_COMMIT;
}

/* ---- Versions and codes ---- */

IDEM_TEST(RuntimeVersionMatchesTheHeaders) {
  CHECK(idem_c_api_version() == IDEM_C_API_VERSION);
  CHECK(strcmp(idem_version(), IDEM_VERSION) == 0);
}

IDEM_TEST(CodeNamesAreAbslNames) {
  CHECK(strcmp(idem_code_name(IDEM_OK), "OK") == 0);
  CHECK(strcmp(idem_code_name(IDEM_INVALID_ARGUMENT), "INVALID_ARGUMENT") ==
        0);
  CHECK(strcmp(idem_code_name(IDEM_UNAUTHENTICATED), "UNAUTHENTICATED") == 0);
  CHECK(strcmp(idem_code_name((idem_code)99), "UNKNOWN") == 0);
  CHECK(strcmp(idem_code_name((idem_code)-1), "UNKNOWN") == 0);
}

/* ---- Options ---- */

IDEM_TEST(OptionSettersRejectNullHandlesAndBadValues) {
  CHECK_CODE(idem_options_set_dedupe_window_ms(NULL, 1000),
             IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "options is NULL"));
  CHECK_CODE(idem_options_set_durability(NULL, IDEM_DURABILITY_SYNC),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_dedupe_scope(NULL, IDEM_DEDUPE_SCOPE_STORE),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_create_if_missing(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_read_only(NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_detect_conflicts(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_refresh_on_duplicate(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_block_cache_bytes(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_write_buffer_bytes(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_bloom_bits_per_key(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_max_background_jobs(NULL, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_expiry_buckets(NULL, 1), IDEM_INVALID_ARGUMENT);

  idem_options* o = idem_options_new();
  CHECK(o != NULL);
  CHECK_CODE(idem_options_set_durability(o, (idem_durability)7),
             IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "unknown durability 7"));
  CHECK_CODE(idem_options_set_dedupe_scope(o, (idem_dedupe_scope)9),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_block_cache_bytes(o, -1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_options_set_write_buffer_bytes(o, -1),
             IDEM_INVALID_ARGUMENT);
  CHECK_OK(idem_options_set_dedupe_window_ms(o, 60000));
  CHECK_OK(idem_options_set_durability(o, IDEM_DURABILITY_BUFFERED));
  CHECK_OK(idem_options_set_dedupe_scope(o, IDEM_DEDUPE_SCOPE_STORE));
  CHECK_OK(idem_options_set_create_if_missing(o, 1));
  CHECK_OK(idem_options_set_read_only(o, 0));
  CHECK_OK(idem_options_set_detect_conflicts(o, 1));
  CHECK_OK(idem_options_set_refresh_on_duplicate(o, 1));
  CHECK_OK(idem_options_set_block_cache_bytes(o, 1 << 20));
  CHECK_OK(idem_options_set_write_buffer_bytes(o, 1 << 20));
  CHECK_OK(idem_options_set_bloom_bits_per_key(o, 8));
  CHECK_OK(idem_options_set_max_background_jobs(o, 1));
  CHECK_OK(idem_options_set_expiry_buckets(o, 2));
  idem_engine* engine = open_store(o);
  idem_options_free(o);  /* copied by open */
  idem_engine_free(engine);
  idem_options_free(NULL);
}

/* ---- Open and close ---- */

IDEM_TEST(OpenRefusesBadOptionsAndLeavesNoHandle) {
  idem_options* o = idem_options_new();
  CHECK_OK(idem_options_set_dedupe_window_ms(o, 0));
  idem_engine* engine = (idem_engine*)o; /* any non-NULL value */
  CHECK_CODE(idem_engine_open(store_path, o, &engine), IDEM_INVALID_ARGUMENT);
  CHECK(engine == NULL);
  CHECK(contains(idem_last_error(), "dedupe_window"));
  CHECK_OK(idem_options_set_dedupe_window_ms(o, 1000));
  CHECK_OK(idem_options_set_bloom_bits_per_key(o, 65));
  CHECK_CODE(idem_engine_open(store_path, o, &engine), IDEM_INVALID_ARGUMENT);
  idem_options_free(o);
}

IDEM_TEST(OpenRejectsNullArguments) {
  idem_engine* engine = NULL;
  CHECK_CODE(idem_engine_open(NULL, NULL, &engine), IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "path is NULL"));
  CHECK_CODE(idem_engine_open(store_path, NULL, NULL), IDEM_INVALID_ARGUMENT);
}

IDEM_TEST(OpenOfAMissingStoreWithoutCreateIsNotFound) {
  idem_options* o = idem_options_new();
  CHECK_OK(idem_options_set_create_if_missing(o, 0));
  idem_engine* engine = NULL;
  CHECK_CODE(idem_engine_open(store_path, o, &engine), IDEM_NOT_FOUND);
  idem_options_free(o);
}

IDEM_TEST(SecondWritableOpenIsRefusedUntilTheFirstCloses) {
  idem_engine* first = open_store(NULL);
  idem_engine* second = NULL;
  CHECK_CODE(idem_engine_open(store_path, NULL, &second),
             IDEM_FAILED_PRECONDITION);
  CHECK(second == NULL);
  CHECK_OK(idem_engine_close(first));
  second = open_store(NULL);
  idem_engine_free(second);
  idem_engine_free(first);
}

IDEM_TEST(ClosedEngineRefusesEveryCall) {
  idem_engine* engine = open_store(NULL);
  CHECK_OK(idem_engine_close(engine));
  CHECK_OK(idem_engine_close(engine)); /* again: OK */
  idem_message* m = message_with_id("a");
  const idem_message* batch[] = {m};
  idem_result* r = NULL;
  idem_result_list* list = NULL;
  int calls = 0;
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_FAILED_PRECONDITION);
  CHECK(contains(idem_last_error(), "engine is closed"));
  CHECK(r == NULL);
  CHECK_CODE(
      idem_engine_process_batch(engine, batch, 1, put_payload, &calls, &list),
      IDEM_FAILED_PRECONDITION);
  CHECK(list == NULL);
  char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_CODE(idem_engine_get_state(engine, "k", 1, &value, &size, &found),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_seen(engine, "a", 1, &found),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_forget(engine, "a", 1), IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_forget_in_partition(engine, "a", 1, "t", 1, 0),
             IDEM_FAILED_PRECONDITION);
  int64_t offset = 0;
  CHECK_CODE(idem_engine_committed_offset(engine, "t", 1, 0, &offset, &found),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_wait_durable(engine, 1), IDEM_FAILED_PRECONDITION);
  idem_stats stats = {.struct_size = sizeof stats};
  CHECK_CODE(idem_engine_stats(engine, &stats), IDEM_FAILED_PRECONDITION);
  idem_outbox_batch* outbox = NULL;
  CHECK_CODE(idem_engine_read_outbox(engine, 0, 10, &outbox),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_ack_outbox(engine, 1), IDEM_FAILED_PRECONDITION);
  CHECK(calls == 0);
  idem_message_free(m);
  idem_engine_free(engine);
}

struct slow_call {
  idem_engine* engine;
  idem_message* message;
  volatile int started;
  idem_code code;
  idem_outcome outcome;
};

static int sleep_then_put(void* user, const idem_message* message,
                          idem_txn* txn) {
  (void)message;
  struct slow_call* call = user;
  call->started = 1;
  struct timespec pause = {0, 200 * 1000 * 1000};
  thrd_sleep(&pause, NULL);
  CHECK_OK(idem_txn_put(txn, "slow", 4, "done", 4));
  return IDEM_HANDLER_COMMIT;
}

static int run_slow_call(void* arg) {
  struct slow_call* call = arg;
  idem_result* r = NULL;
  call->code =
      idem_engine_process(call->engine, call->message, sleep_then_put, call, &r);
  call->outcome = idem_result_outcome(r);
  idem_result_free(r);
  return 0;
}

IDEM_TEST(CloseWaitsForTheCallInProgressToCommit) {
  struct slow_call call = {open_store(NULL), message_with_id("slow"), 0,
                           IDEM_UNKNOWN, IDEM_OUTCOME_FAILED};
  thrd_t thread;
  CHECK(thrd_create(&thread, run_slow_call, &call) == thrd_success);
  while (!call.started) {
    struct timespec pause = {0, 1000 * 1000};
    thrd_sleep(&pause, NULL);
  }
  CHECK_OK(idem_engine_close(call.engine));
  thrd_join(thread, NULL);
  CHECK_OK(call.code);
  CHECK(call.outcome == IDEM_OUTCOME_PROCESSED);
  idem_engine* reopened = open_store(NULL);
  char* value = state_of(reopened, "slow");
  CHECK(value != NULL && strcmp(value, "done") == 0);
  idem_free(value);
  idem_engine_free(reopened);
  idem_message_free(call.message);
  idem_engine_free(call.engine);
}

static int close_own_engine(void* user, const idem_message* message,
                            idem_txn* txn) {
  (void)message;
  (void)txn;
  CHECK_CODE(idem_engine_close((idem_engine*)user), IDEM_FAILED_PRECONDITION);
  CHECK(contains(idem_last_error(), "inside one of the engine's handlers"));
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(CloseFromInsideAHandlerIsRefused) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, close_own_engine, engine, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

/* ---- Processing ---- */

IDEM_TEST(ProcessCommitsTheHandlersWritesAndDuplicatesGetTheResult) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("order-1");
  CHECK_OK(idem_message_set_payload(m, "42", 2));
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  size_t size = 0;
  const char* value = idem_result_value(r, &size);
  CHECK(size == 4 && memcmp(value, "r:42", 4) == 0);
  CHECK(idem_result_error_code(r) == IDEM_OK);
  CHECK(strcmp(idem_result_error_message(r), "") == 0);
  CHECK(idem_result_sequence(r) > 0);
  CHECK(idem_result_first_processed_at_us(r) > 0);
  CHECK(!idem_result_permanent(r));
  idem_result_free(r);

  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_DUPLICATE);
  value = idem_result_value(r, &size);
  CHECK(size == 4 && memcmp(value, "r:42", 4) == 0);
  idem_result_free(r);
  CHECK(calls == 1);
  char* state = state_of(engine, "k");
  CHECK(state != NULL && strcmp(state, "42") == 0);
  idem_free(state);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(ProcessBatchRunsMessagesInOrderAndDedupesWithinTheBatch) {
  idem_engine* engine = open_store(NULL);
  idem_message* a = message_with_id("a");
  idem_message* b = message_with_id("b");
  idem_message* again = message_with_id("a");
  const idem_message* batch[] = {a, b, again};
  int calls = 0;
  idem_result_list* list = NULL;
  CHECK_OK(idem_engine_process_batch(engine, batch, 3, increment, &calls,
                                     &list));
  CHECK(idem_result_list_size(list) == 3);
  CHECK(idem_result_outcome(idem_result_list_get(list, 0)) ==
        IDEM_OUTCOME_PROCESSED);
  CHECK(idem_result_outcome(idem_result_list_get(list, 1)) ==
        IDEM_OUTCOME_PROCESSED);
  CHECK(idem_result_outcome(idem_result_list_get(list, 2)) ==
        IDEM_OUTCOME_DUPLICATE);
  CHECK(idem_result_list_get(list, 3) == NULL);
  CHECK(calls == 2);
  idem_result_list_free(list);
  char* count = state_of(engine, "count");
  CHECK(count != NULL && strcmp(count, "2") == 0); /* b saw a's write */
  idem_free(count);

  CHECK_OK(idem_engine_process_batch(engine, NULL, 0, increment, NULL, &list));
  CHECK(idem_result_list_size(list) == 0);
  idem_result_list_free(list);
  idem_message_free(a);
  idem_message_free(b);
  idem_message_free(again);
  idem_engine_free(engine);
}

IDEM_TEST(ProcessBatchRejectsANullMessageBeforeAnyHandlerRuns) {
  idem_engine* engine = open_store(NULL);
  idem_message* a = message_with_id("a");
  const idem_message* batch[] = {a, NULL};
  int calls = 0;
  idem_result_list* list = NULL;
  CHECK_CODE(
      idem_engine_process_batch(engine, batch, 2, increment, &calls, &list),
      IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "message 1 is NULL"));
  CHECK_CODE(
      idem_engine_process_batch(engine, NULL, 2, increment, &calls, &list),
      IDEM_INVALID_ARGUMENT);
  CHECK(calls == 0 && list == NULL);
  idem_message_free(a);
  idem_engine_free(engine);
}

IDEM_TEST(NonZeroReturnIsATransientFailureThatCommitsNothing) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, return_five, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(!idem_result_permanent(r));
  CHECK(idem_result_error_code(r) == IDEM_UNKNOWN);
  CHECK(strcmp(idem_result_error_message(r), "handler returned 5") == 0);
  CHECK(idem_result_sequence(r) == 0);
  idem_result_free(r);
  char* state = state_of(engine, "k");
  CHECK(state == NULL);
  /* A redelivery runs the handler again. */
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  CHECK(calls == 2);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(SetErrorGivesTheFailuresCodeAndMessage) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, fail_with_error, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_error_code(r) == IDEM_UNAVAILABLE);
  CHECK(strcmp(idem_result_error_message(r), "ledger offline") == 0);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(PermanentFailureIsRememberedUntilForgotten) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, fail_permanently, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_permanent(r));
  CHECK(idem_result_error_code(r) == IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_result_error_message(r), "bad amount"));
  CHECK(idem_result_sequence(r) > 0);
  idem_result_free(r);
  CHECK(state_of(engine, "k") == NULL); /* its writes were dropped */
  CHECK_OK(idem_engine_process(engine, m, fail_permanently, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_permanent(r));
  CHECK(calls == 1); /* answered from the record */
  idem_result_free(r);

  CHECK_OK(idem_engine_forget(engine, "a", 1));
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  CHECK(calls == 2);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(BadMessagesAreRejectedBeforeTheHandlerRuns) {
  idem_engine* engine = open_store(NULL);
  int calls = 0;
  idem_result* r = NULL;
  idem_message* m = idem_message_new();
  /* No ID. */
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  /* An ID one byte too long. */
  char* long_id = malloc(IDEM_MAX_ID_BYTES + 1);
  memset(long_id, 'x', IDEM_MAX_ID_BYTES + 1);
  CHECK_OK(idem_message_set_id(m, long_id, IDEM_MAX_ID_BYTES + 1));
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  /* The longest ID is fine. */
  CHECK_OK(idem_message_set_id(m, long_id, IDEM_MAX_ID_BYTES));
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  idem_result_free(r);
  /* A source one byte too long. */
  CHECK_OK(idem_message_set_id(m, "b", 1));
  CHECK_OK(idem_message_set_source(m, long_id, IDEM_MAX_SOURCE_BYTES + 1));
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  /* With a position (source and offset >= 0), a negative partition. */
  CHECK_OK(idem_message_set_source(m, "t", 1));
  CHECK_OK(idem_message_set_offset(m, 0));
  CHECK_OK(idem_message_set_partition(m, -1));
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK_OK(idem_message_set_partition(m, 0));
  CHECK_OK(idem_message_set_offset(m, INT64_MAX));
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK_OK(idem_message_set_offset(m, 0));
  CHECK_OK(idem_message_set_ttl_ms(m, -1));
  CHECK_CODE(idem_engine_process(engine, m, put_payload, &calls, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK(r == NULL);
  CHECK(calls == 1);
  free(long_id);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(NegativeOffsetProcessesWithoutRecordingAPosition) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  CHECK_OK(idem_message_set_source(m, "payments", 8));
  CHECK_OK(idem_message_set_offset(m, -5));
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  int64_t offset = 7;
  int found = 1;
  CHECK_OK(
      idem_engine_committed_offset(engine, "payments", 8, 0, &offset, &found));
  CHECK(found == 0 && offset == -1);
  /* With an offset it is recorded. */
  idem_message* n = message_with_id("b");
  CHECK_OK(idem_message_set_source(n, "payments", 8));
  CHECK_OK(idem_message_set_partition(n, 3));
  CHECK_OK(idem_message_set_offset(n, 17));
  CHECK_OK(idem_engine_process(engine, n, put_payload, &calls, &r));
  idem_result_free(r);
  CHECK_OK(
      idem_engine_committed_offset(engine, "payments", 8, 3, &offset, &found));
  CHECK(found == 1 && offset == 17);
  CHECK_CODE(idem_engine_committed_offset(engine, "", 0, 3, &offset, &found),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(
      idem_engine_committed_offset(engine, "payments", 8, -1, &offset, &found),
      IDEM_INVALID_ARGUMENT);
  CHECK_CODE(
      idem_engine_committed_offset(engine, "payments", 8, 3, NULL, &found),
      IDEM_INVALID_ARGUMENT);
  idem_message_free(m);
  idem_message_free(n);
  idem_engine_free(engine);
}

IDEM_TEST(MessagesCopyTheirBytes) {
  idem_message* m = idem_message_new();
  char id[] = "abc";
  CHECK_OK(idem_message_set_id(m, id, 3));
  CHECK_OK(idem_message_set_payload(m, "p\0q", 3));
  CHECK_OK(idem_message_set_source(m, "src", 3));
  CHECK_OK(idem_message_set_fingerprint(m, "f", 1));
  CHECK_OK(idem_message_set_partition(m, 4));
  CHECK_OK(idem_message_set_offset(m, 9));
  id[0] = 'z';
  size_t size = 0;
  CHECK(memcmp(idem_message_id(m, &size), "abc", 3) == 0 && size == 3);
  CHECK(memcmp(idem_message_payload(m, &size), "p\0q", 3) == 0 && size == 3);
  CHECK(memcmp(idem_message_source(m, &size), "src", 3) == 0 && size == 3);
  CHECK(idem_message_partition(m) == 4);
  CHECK(idem_message_offset(m) == 9);
  CHECK(idem_message_id(m, NULL) != NULL);
  CHECK_CODE(idem_message_set_id(m, NULL, 2), IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "is NULL with a size of 2"));
  CHECK_OK(idem_message_set_payload(m, NULL, 0));
  CHECK(idem_message_payload(m, &size) != NULL && size == 0);
  idem_message_free(m);
}

IDEM_TEST(ExceptionsInsideTheLibraryBecomeCodes) {
  /* std::string refuses a length over its max_size() (std::length_error)
   * before reading a byte or allocating: the throw must come back as a
   * code, not unwind into C. */
  idem_message* m = idem_message_new();
  CHECK_CODE(idem_message_set_id(m, "x", SIZE_MAX - 8), IDEM_INTERNAL);
  CHECK(contains(idem_last_error(), "message_set_id threw"));
  CHECK_OK(idem_message_set_id(m, "x", 1)); /* still usable */
  idem_message_free(m);
}

/* ---- Transactions ---- */

static int read_write_delete(void* user, const idem_message* message,
                             idem_txn* txn) {
  (void)user;
  (void)message;
  const char* value = NULL;
  size_t size = 0;
  int found = 1;
  CHECK_OK(idem_txn_get(txn, "x", 1, &value, &size, &found));
  CHECK(found == 0 && value == NULL);
  CHECK_OK(idem_txn_put(txn, "x", 1, "1", 1));
  CHECK_OK(idem_txn_get(txn, "x", 1, &value, &size, &found));
  CHECK(found == 1 && size == 1 && value[0] == '1');
  CHECK_OK(idem_txn_get(txn, "old", 3, &value, &size, &found));
  CHECK(found == 1 && size == 3 && memcmp(value, "old", 3) == 0);
  CHECK_OK(idem_txn_delete(txn, "old", 3));
  CHECK_OK(idem_txn_delete(txn, "absent", 6));
  CHECK_OK(idem_txn_get(txn, "old", 3, &value, &size, &found));
  CHECK(found == 0);
  CHECK_OK(idem_txn_put(txn, "", 0, NULL, 0)); /* empty key and value */
  CHECK_CODE(idem_txn_put(txn, NULL, 1, "v", 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_put(txn, "k", 1, NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_get(txn, "k", 1, NULL, &size, &found),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_delete(txn, NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_set_result(txn, NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_set_error(txn, IDEM_OK, "x"), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_emit(txn, NULL, 1, "k", 1, "v", 1),
             IDEM_INVALID_ARGUMENT);
  return IDEM_HANDLER_COMMIT;
}

static int put_old(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_put(txn, "old", 3, "old", 3));
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(TxnReadsItsOwnWritesAndTheStore) {
  idem_engine* engine = open_store(NULL);
  idem_message* first = message_with_id("first");
  idem_message* second = message_with_id("second");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, first, put_old, NULL, &r));
  idem_result_free(r);
  CHECK_OK(idem_engine_process(engine, second, read_write_delete, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  CHECK(state_of(engine, "old") == NULL);
  char* x = state_of(engine, "x");
  CHECK(x != NULL && strcmp(x, "1") == 0);
  idem_free(x);
  idem_message_free(first);
  idem_message_free(second);
  idem_engine_free(engine);
}

IDEM_TEST(TxnKeptAfterItsHandlerReturnedFailsCleanly) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_txn* kept = NULL;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, keep_txn, &kept, &r));
  idem_result_free(r);
  CHECK(kept != NULL);
  const char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_CODE(idem_txn_put(kept, "k", 1, "v", 1), IDEM_FAILED_PRECONDITION);
  CHECK(contains(idem_last_error(), "txn used outside its handler"));
  CHECK_CODE(idem_txn_get(kept, "k", 1, &value, &size, &found),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_delete(kept, "k", 1), IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_set_result(kept, "r", 1), IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_emit(kept, "d", 1, "k", 1, "v", 1),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_set_error(kept, IDEM_INTERNAL, "x"),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_emit_with_options(kept, "d", 1, "k", 1, "v", 1, -1, 0,
                                        NULL, 0),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_put(NULL, "k", 1, "v", 1), IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "txn is NULL"));
  idem_message_free(m);
  idem_engine_free(engine);
}

/* A handler that tries the txn kept from an earlier handler call. */
static int use_earlier_txn(void* user, const idem_message* message,
                           idem_txn* txn) {
  (void)message;
  idem_txn* earlier = *(idem_txn**)user;
  CHECK(earlier != txn);
  CHECK_CODE(idem_txn_put(earlier, "stale", 5, "v", 1),
             IDEM_FAILED_PRECONDITION);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(TxnOfAnEarlierHandlerDoesNotWriteIntoTheNextOne) {
  idem_engine* engine = open_store(NULL);
  idem_message* a = message_with_id("a");
  idem_message* b = message_with_id("b");
  idem_txn* kept = NULL;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, a, keep_txn, &kept, &r));
  idem_result_free(r);
  CHECK_OK(idem_engine_process(engine, b, use_earlier_txn, &kept, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  CHECK(state_of(engine, "stale") == NULL);
  idem_message_free(a);
  idem_message_free(b);
  idem_engine_free(engine);
}

struct other_thread {
  idem_txn* txn;
  idem_code code;
};

static int put_from_thread(void* arg) {
  struct other_thread* t = arg;
  t->code = idem_txn_put(t->txn, "k", 1, "v", 1);
  return 0;
}

static int hand_txn_to_a_thread(void* user, const idem_message* message,
                                idem_txn* txn) {
  (void)message;
  struct other_thread* t = user;
  t->txn = txn;
  thrd_t thread;
  CHECK(thrd_create(&thread, put_from_thread, t) == thrd_success);
  thrd_join(thread, NULL);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(TxnUsedFromAnotherThreadFails) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  struct other_thread t = {NULL, IDEM_OK};
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, hand_txn_to_a_thread, &t, &r));
  idem_result_free(r);
  CHECK(t.code == IDEM_FAILED_PRECONDITION);
  CHECK(state_of(engine, "k") == NULL);
  idem_message_free(m);
  idem_engine_free(engine);
}

static int reenter(void* user, const idem_message* message, idem_txn* txn) {
  (void)txn;
  idem_engine* engine = user;
  idem_result* r = NULL;
  int calls = 0;
  CHECK_CODE(idem_engine_process(engine, message, put_payload, &calls, &r),
             IDEM_FAILED_PRECONDITION);
  CHECK(r == NULL && calls == 0);
  char* value = state_of(engine, "k"); /* reads are served */
  idem_free(value);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(ProcessFromInsideAHandlerIsRefusedButReadsAreServed) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, reenter, engine, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

/* ---- Outbox ---- */

static int emit_two(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_emit(txn, "out", 3, "k1", 2, "v1", 2));
  CHECK_OK(idem_txn_emit(txn, "out", 3, "k2", 2, NULL, 0));
  return IDEM_HANDLER_COMMIT;
}

static int emit_nowhere(void* user, const idem_message* message,
                        idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_put(txn, "k", 1, "v", 1));
  CHECK_OK(idem_txn_emit(txn, "", 0, "k", 1, "v", 1));
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(EmitsReachTheOutboxUntilAcknowledged) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, emit_two, NULL, &r));
  idem_result_free(r);
  idem_outbox_batch* batch = NULL;
  CHECK_OK(idem_engine_read_outbox(engine, 0, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 2);
  size_t size = 0;
  const char* dest = idem_outbox_destination(batch, 0, &size);
  CHECK(size == 3 && memcmp(dest, "out", 3) == 0);
  CHECK(memcmp(idem_outbox_key(batch, 0, &size), "k1", 2) == 0 && size == 2);
  CHECK(memcmp(idem_outbox_value(batch, 0, &size), "v1", 2) == 0 &&
        size == 2);
  idem_outbox_value(batch, 1, &size);
  CHECK(size == 0);
  const char* id = idem_outbox_message_id(batch, 0, &size);
  CHECK(size > 2 && memcmp(id + size - 2, "-0", 2) == 0);
  CHECK(idem_outbox_partition(batch, 0) == -1);
  const uint64_t first = idem_outbox_position(batch, 0);
  const uint64_t second = idem_outbox_position(batch, 1);
  CHECK(first > 0 && second > first);
  CHECK(idem_outbox_position(batch, 2) == 0);
  CHECK(idem_outbox_key(batch, 2, &size) == NULL && size == 0);
  idem_outbox_batch_free(batch);

  CHECK_OK(idem_engine_read_outbox(engine, first, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 1);
  idem_outbox_batch_free(batch);
  CHECK_OK(idem_engine_ack_outbox(engine, second));
  CHECK_OK(idem_engine_read_outbox(engine, 0, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 0);
  idem_outbox_batch_free(batch);

  CHECK_CODE(idem_engine_read_outbox(engine, 0, 0, &batch),
             IDEM_INVALID_ARGUMENT);
  CHECK(batch == NULL);
  CHECK_CODE(idem_engine_read_outbox(engine, 0, 1, NULL),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_ack_outbox(engine, 0), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_ack_outbox(engine, second + 100),
             IDEM_INVALID_ARGUMENT);
  idem_message_free(m);
  idem_engine_free(engine);
}

static int emit_with_options(void* user, const idem_message* message,
                             idem_txn* txn) {
  (void)user;
  (void)message;
  const idem_header headers[] = {{"trace", 5, "t1", 2}, {"empty", 5, NULL, 0}};
  CHECK_OK(idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, 4, 0,
                                      headers, 2));
  CHECK_OK(idem_txn_emit_with_options(txn, "out", 3, "gone", 4, NULL, 0, -1,
                                      1, NULL, 0));
  const idem_header bad[] = {{NULL, 3, "v", 1}};
  CHECK_CODE(idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, 0, 0,
                                        bad, 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, 0, 0,
                                        NULL, 1),
             IDEM_INVALID_ARGUMENT);
  return IDEM_HANDLER_COMMIT;
}

static int emit_tombstone_with_value(void* user, const idem_message* message,
                                     idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, -1, 1,
                                      NULL, 0));
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(EmitWithOptionsCarriesPartitionHeadersAndTombstones) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, emit_with_options, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  idem_outbox_batch* batch = NULL;
  CHECK_OK(idem_engine_read_outbox(engine, 0, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 2);
  CHECK(idem_outbox_partition(batch, 0) == 4);
  CHECK(!idem_outbox_tombstone(batch, 0));
  CHECK(idem_outbox_header_count(batch, 0) == 2);
  size_t size = 0;
  CHECK(memcmp(idem_outbox_header_name(batch, 0, 0, &size), "trace", 5) == 0 &&
        size == 5);
  CHECK(memcmp(idem_outbox_header_value(batch, 0, 0, &size), "t1", 2) == 0 &&
        size == 2);
  idem_outbox_header_value(batch, 0, 1, &size);
  CHECK(size == 0);
  CHECK(idem_outbox_header_name(batch, 0, 2, &size) == NULL && size == 0);
  CHECK(idem_outbox_tombstone(batch, 1));
  CHECK(idem_outbox_header_count(batch, 1) == 0);
  CHECK(idem_outbox_tombstone(NULL, 0) == 0);
  CHECK(idem_outbox_header_count(NULL, 0) == 0);
  idem_outbox_batch_free(batch);
  /* A tombstone with a value fails its message. */
  idem_message* n = message_with_id("b");
  CHECK_OK(idem_engine_process(engine, n, emit_tombstone_with_value, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_error_code(r) == IDEM_INVALID_ARGUMENT);
  idem_result_free(r);
  idem_message_free(m);
  idem_message_free(n);
  idem_engine_free(engine);
}

IDEM_TEST(EmitToAnEmptyDestinationFailsTheMessageAndCommitsNothing) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, emit_nowhere, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_error_code(r) == IDEM_INVALID_ARGUMENT);
  idem_result_free(r);
  CHECK(state_of(engine, "k") == NULL);
  idem_message_free(m);
  idem_engine_free(engine);
}

/* ---- Durability, stats, seen, forget ---- */

IDEM_TEST(WaitDurableAcceptsIssuedSequencesOnly) {
  idem_options* o = idem_options_new();
  CHECK_OK(idem_options_set_durability(o, IDEM_DURABILITY_BUFFERED));
  idem_engine* engine = open_store(o);
  idem_options_free(o);
  idem_message* m = message_with_id("a");
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  const uint64_t sequence = idem_result_sequence(r);
  idem_result_free(r);
  CHECK(sequence > 0);
  CHECK_OK(idem_engine_wait_durable(engine, sequence));
  CHECK_CODE(idem_engine_wait_durable(engine, sequence + 1000),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_wait_durable(NULL, sequence), IDEM_INVALID_ARGUMENT);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(StatsCountOutcomesAndFillOnlyTheGivenSize) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  int calls = 0;
  idem_result* r = NULL;
  for (int i = 0; i < 2; ++i) {
    CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
    idem_result_free(r);
  }
  idem_stats stats;
  memset(&stats, 0xff, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(idem_engine_stats(engine, &stats));
  CHECK(stats.struct_size == sizeof stats);
  CHECK(stats.processed == 1 && stats.duplicates == 1 && stats.failed == 0);
  CHECK(stats.commits >= 1 && stats.user_bytes > 0);
  /* An older, shorter struct: the fields past it stay as they were. */
  memset(&stats, 0xff, sizeof stats);
  stats.struct_size = offsetof(idem_stats, conflicts);
  CHECK_OK(idem_engine_stats(engine, &stats));
  CHECK(stats.processed == 1 && stats.failed == 0);
  CHECK(stats.conflicts == UINT64_MAX);
  stats.struct_size = 0;
  CHECK_CODE(idem_engine_stats(engine, &stats), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_stats(engine, NULL), IDEM_INVALID_ARGUMENT);
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(SeenAndForgetFollowTheDedupeRecord) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  int seen = 1;
  CHECK_OK(idem_engine_seen(engine, "a", 1, &seen));
  CHECK(seen == 0);
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  idem_result_free(r);
  CHECK_OK(idem_engine_seen(engine, "a", 1, &seen));
  CHECK(seen == 1);
  CHECK_OK(idem_engine_forget(engine, "a", 1));
  CHECK_OK(idem_engine_forget(engine, "never", 5)); /* absent: OK */
  CHECK_OK(idem_engine_seen(engine, "a", 1, &seen));
  CHECK(seen == 0);
  CHECK_CODE(idem_engine_seen(engine, "", 0, &seen), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_seen(engine, "a", 1, NULL), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_forget(engine, "", 0), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_forget(engine, NULL, 1), IDEM_INVALID_ARGUMENT);
  /* A store-scoped store forgets by ID alone. */
  CHECK_OK(idem_engine_forget_in_partition(engine, "a", 1, "t", 1, 0));
  idem_message_free(m);
  idem_engine_free(engine);
}

IDEM_TEST(PartitionScopedStoreForgetsPerPartition) {
  idem_options* o = idem_options_new();
  CHECK_OK(idem_options_set_dedupe_scope(o, IDEM_DEDUPE_SCOPE_PARTITION));
  idem_engine* engine = open_store(o);
  idem_options_free(o);
  idem_message* m = message_with_id("a");
  CHECK_OK(idem_message_set_source(m, "t", 1));
  CHECK_OK(idem_message_set_partition(m, 2));
  int calls = 0;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  idem_result_free(r);
  CHECK_CODE(idem_engine_forget(engine, "a", 1), IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_forget_in_partition(engine, "a", 1, "t", 1, -1),
             IDEM_INVALID_ARGUMENT);
  CHECK_OK(idem_engine_forget_in_partition(engine, "a", 1, "t", 1, 2));
  CHECK_OK(idem_engine_process(engine, m, put_payload, &calls, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  CHECK(calls == 2);
  idem_result_free(r);
  idem_message_free(m);
  idem_engine_free(engine);
}

/* ---- NULL handles ---- */

IDEM_TEST(NullHandlesAreInvalidArguments) {
  idem_message* m = message_with_id("a");
  const idem_message* batch[] = {m};
  idem_result* r = NULL;
  idem_result_list* list = NULL;
  CHECK_CODE(idem_engine_process(NULL, m, put_payload, NULL, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "engine is NULL"));
  CHECK_CODE(idem_engine_process_batch(NULL, batch, 1, put_payload, NULL,
                                       &list),
             IDEM_INVALID_ARGUMENT);
  idem_engine* engine = open_store(NULL);
  CHECK_CODE(idem_engine_process(engine, NULL, put_payload, NULL, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_process(engine, m, NULL, NULL, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_process(engine, m, put_payload, NULL, NULL),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_process_batch(engine, batch, 1, NULL, NULL, &list),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(
      idem_engine_process_batch(engine, batch, 1, put_payload, NULL, NULL),
      IDEM_INVALID_ARGUMENT);
  char* value = NULL;
  size_t size = 0;
  int found = 0;
  int64_t offset = 0;
  CHECK_CODE(idem_engine_get_state(NULL, "k", 1, &value, &size, &found),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_get_state(engine, "k", 1, NULL, &size, &found),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_get_state(engine, NULL, 1, &value, &size, &found),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_seen(NULL, "a", 1, &found), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_forget(NULL, "a", 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_forget_in_partition(NULL, "a", 1, "t", 1, 0),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_committed_offset(NULL, "t", 1, 0, &offset, &found),
             IDEM_INVALID_ARGUMENT);
  idem_stats stats = {.struct_size = sizeof stats};
  CHECK_CODE(idem_engine_stats(NULL, &stats), IDEM_INVALID_ARGUMENT);
  idem_outbox_batch* outbox = NULL;
  CHECK_CODE(idem_engine_read_outbox(NULL, 0, 1, &outbox),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_ack_outbox(NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_close(NULL), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_id(NULL, "a", 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_payload(NULL, "a", 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_source(NULL, "a", 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_fingerprint(NULL, "a", 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_partition(NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_offset(NULL, 1), IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_message_set_ttl_ms(NULL, 1), IDEM_INVALID_ARGUMENT);
  /* Getters on NULL give empty values; frees accept NULL. */
  CHECK(idem_message_id(NULL, &size) == NULL && size == 0);
  CHECK(idem_message_payload(NULL, NULL) == NULL);
  CHECK(idem_message_source(NULL, NULL) == NULL);
  CHECK(idem_message_partition(NULL) == 0);
  CHECK(idem_message_offset(NULL) == -1);
  CHECK(idem_result_outcome(NULL) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_value(NULL, &size) == NULL && size == 0);
  CHECK(idem_result_error_code(NULL) == IDEM_OK);
  CHECK(strcmp(idem_result_error_message(NULL), "") == 0);
  CHECK(idem_result_permanent(NULL) == 0);
  CHECK(idem_result_sequence(NULL) == 0);
  CHECK(idem_result_first_processed_at_us(NULL) == INT64_MIN);
  CHECK(idem_result_list_size(NULL) == 0);
  CHECK(idem_result_list_get(NULL, 0) == NULL);
  CHECK(idem_outbox_batch_size(NULL) == 0);
  CHECK(idem_outbox_position(NULL, 0) == 0);
  CHECK(idem_outbox_message_id(NULL, 0, &size) == NULL && size == 0);
  CHECK(idem_outbox_destination(NULL, 0, NULL) == NULL);
  CHECK(idem_outbox_partition(NULL, 0) == 0);
  idem_result_free(NULL);
  idem_result_list_free(NULL);
  idem_outbox_batch_free(NULL);
  idem_message_free(NULL);
  idem_engine_free(NULL);
  idem_free(NULL);
  idem_message_free(m);
  idem_engine_free(engine);
}

/* ---- Runner ---- */

struct test_case {
  const char* name;
  void (*run)(void);
};

#define CASE(name) {#name, name}
static const struct test_case tests[] = {
    CASE(RuntimeVersionMatchesTheHeaders),
    CASE(CodeNamesAreAbslNames),
    CASE(OptionSettersRejectNullHandlesAndBadValues),
    CASE(OpenRefusesBadOptionsAndLeavesNoHandle),
    CASE(OpenRejectsNullArguments),
    CASE(OpenOfAMissingStoreWithoutCreateIsNotFound),
    CASE(SecondWritableOpenIsRefusedUntilTheFirstCloses),
    CASE(ClosedEngineRefusesEveryCall),
    CASE(CloseWaitsForTheCallInProgressToCommit),
    CASE(CloseFromInsideAHandlerIsRefused),
    CASE(ProcessCommitsTheHandlersWritesAndDuplicatesGetTheResult),
    CASE(ProcessBatchRunsMessagesInOrderAndDedupesWithinTheBatch),
    CASE(ProcessBatchRejectsANullMessageBeforeAnyHandlerRuns),
    CASE(NonZeroReturnIsATransientFailureThatCommitsNothing),
    CASE(SetErrorGivesTheFailuresCodeAndMessage),
    CASE(PermanentFailureIsRememberedUntilForgotten),
    CASE(BadMessagesAreRejectedBeforeTheHandlerRuns),
    CASE(NegativeOffsetProcessesWithoutRecordingAPosition),
    CASE(MessagesCopyTheirBytes),
    CASE(ExceptionsInsideTheLibraryBecomeCodes),
    CASE(TxnReadsItsOwnWritesAndTheStore),
    CASE(TxnKeptAfterItsHandlerReturnedFailsCleanly),
    CASE(TxnOfAnEarlierHandlerDoesNotWriteIntoTheNextOne),
    CASE(TxnUsedFromAnotherThreadFails),
    CASE(ProcessFromInsideAHandlerIsRefusedButReadsAreServed),
    CASE(EmitsReachTheOutboxUntilAcknowledged),
    CASE(EmitWithOptionsCarriesPartitionHeadersAndTombstones),
    CASE(EmitToAnEmptyDestinationFailsTheMessageAndCommitsNothing),
    CASE(WaitDurableAcceptsIssuedSequencesOnly),
    CASE(StatsCountOutcomesAndFillOnlyTheGivenSize),
    CASE(SeenAndForgetFollowTheDedupeRecord),
    CASE(PartitionScopedStoreForgetsPerPartition),
    CASE(NullHandlesAreInvalidArguments),
};

/* Runs one test in a fresh temporary directory, removed afterwards. */
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
