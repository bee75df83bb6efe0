/* The C API (include/idem/c.h, c/) from plain C11: versions and codes,
 * options, open and close, processing and messages, with their failure
 * paths. Runner and helpers: tests/c_api_testing.{h,c}. */

#define _XOPEN_SOURCE 700

#include <threads.h>
#include <time.h>

#include "idem/version.h"
#include "tests/c_api_testing.h"

static int return_five(void* user, const idem_message* message, idem_txn* txn) {
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

/* ---- Versions and codes ---- */

IDEM_TEST(RuntimeVersionMatchesTheHeaders) {
  CHECK(idem_c_api_version() == IDEM_C_API_VERSION);
  CHECK(strcmp(idem_version(), IDEM_VERSION) == 0);
}

IDEM_TEST(CodeNamesAreAbslNames) {
  CHECK(strcmp(idem_code_name(IDEM_OK), "OK") == 0);
  CHECK(strcmp(idem_code_name(IDEM_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
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
  CHECK_CODE(idem_options_set_detect_conflicts(NULL, 1), IDEM_INVALID_ARGUMENT);
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
  CHECK_CODE(idem_options_set_write_buffer_bytes(o, -1), IDEM_INVALID_ARGUMENT);
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
  idem_options_free(o); /* copied by open */
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
  call->code = idem_engine_process(call->engine, call->message, sleep_then_put,
                                   call, &r);
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
  CHECK(process_id(engine, "a", close_own_engine, engine) ==
        IDEM_OUTCOME_PROCESSED);
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
  CHECK_OK(
      idem_engine_process_batch(engine, batch, 3, increment, &calls, &list));
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
