/* The C API (include/idem/c.h, c/) from plain C11: transactions, the
 * outbox, durability, stats, seen and forget, and NULL handles, with their
 * failure paths. Runner and helpers: tests/c_api_testing.{h,c}. */

#define _XOPEN_SOURCE 700

#include <threads.h>

#include "tests/c_api_testing.h"

/* Keeps its txn in *user. */
static int keep_txn(void* user, const idem_message* message, idem_txn* txn) {
  (void)message;
  *(idem_txn**)user = txn;
  return IDEM_HANDLER_COMMIT;
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
  CHECK_CODE(
      idem_txn_emit_with_options(kept, "d", 1, "k", 1, "v", 1, -1, 0, NULL, 0),
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
  CHECK(process_id(engine, "a", reenter, engine) == IDEM_OUTCOME_PROCESSED);
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
  CHECK(memcmp(idem_outbox_value(batch, 0, &size), "v1", 2) == 0 && size == 2);
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
  CHECK_OK(idem_txn_emit_with_options(txn, "out", 3, "gone", 4, NULL, 0, -1, 1,
                                      NULL, 0));
  const idem_header bad[] = {{NULL, 3, "v", 1}};
  CHECK_CODE(
      idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, 0, 0, bad, 1),
      IDEM_INVALID_ARGUMENT);
  CHECK_CODE(
      idem_txn_emit_with_options(txn, "out", 3, "k", 1, "v", 1, 0, 0, NULL, 1),
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
  CHECK_CODE(
      idem_engine_process_batch(NULL, batch, 1, put_payload, NULL, &list),
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
  CHECK_CODE(idem_message_set_fingerprint(NULL, "a", 1), IDEM_INVALID_ARGUMENT);
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
