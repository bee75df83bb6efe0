/* The C API's state calls beyond single keys (include/idem/c.h, "State
 * beyond single keys"; docs/state.md) from plain C11: scans in a handler and
 * of the committed state, merges, range deletions, and their failure
 * paths. Runner and helpers: tests/c_api_testing.{h,c}. */

#define _XOPEN_SOURCE 700

#include "tests/c_api_testing.h"

/* What a scan visited: the keys joined with ',' (values: their first
 * byte), stopping after `stop_after` keys when it is non-zero. */
typedef struct scan_seen {
  char keys[256];
  size_t count;
  size_t stop_after;
} scan_seen;

static int collect(void* user, const char* key, size_t key_size,
                   const char* value, size_t value_size) {
  scan_seen* seen = (scan_seen*)user;
  size_t used = strlen(seen->keys);
  if (used + key_size + 4 < sizeof seen->keys) {
    memcpy(seen->keys + used, key, key_size);
    seen->keys[used + key_size] = '=';
    seen->keys[used + key_size + 1] = value_size > 0 ? value[0] : '_';
    seen->keys[used + key_size + 2] = ',';
    seen->keys[used + key_size + 3] = '\0';
  }
  ++seen->count;
  return seen->stop_after != 0 && seen->count >= seen->stop_after;
}

static int put_abcd(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_OK(idem_txn_put(txn, "a", 1, "1", 1));
  CHECK_OK(idem_txn_put(txn, "b", 1, "2", 1));
  CHECK_OK(idem_txn_put(txn, "c", 1, "3", 1));
  CHECK_OK(idem_txn_put(txn, "d", 1, "4", 1));
  return IDEM_HANDLER_COMMIT;
}

static int scan_in_handler(void* user, const idem_message* message,
                           idem_txn* txn) {
  (void)message;
  scan_seen* seen = (scan_seen*)user;
  CHECK_OK(idem_txn_delete(txn, "b", 1));
  CHECK_OK(idem_txn_put(txn, "bb", 2, "9", 1));
  /* [a, d): own writes merged with the store, the deleted key hidden. */
  CHECK_OK(idem_txn_scan(txn, "a", 1, "d", 1, 0, 0, collect, &seen[0]));
  /* Reverse, limited, no upper bound. */
  CHECK_OK(idem_txn_scan(txn, "b", 1, NULL, 0, 1, 2, collect, &seen[1]));
  /* A prefix; the visitor stops after one key. */
  seen[2].stop_after = 1;
  CHECK_OK(idem_txn_scan_prefix(txn, "b", 1, 0, 0, collect, &seen[2]));
  CHECK_CODE(idem_txn_scan(txn, "b", 1, "a", 1, 0, 0, collect, &seen[3]),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_scan(txn, "a", 1, "b", 1, 0, 0, NULL, NULL),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_scan(txn, NULL, 1, "b", 1, 0, 0, collect, &seen[3]),
             IDEM_INVALID_ARGUMENT);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(ScansSeeOwnWritesAndTheStoreInOrder) {
  idem_engine* engine = open_store(NULL);
  idem_message* first = message_with_id("first");
  idem_message* second = message_with_id("second");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, first, put_abcd, NULL, &r));
  idem_result_free(r);
  scan_seen seen[4];
  memset(seen, 0, sizeof seen);
  CHECK_OK(idem_engine_process(engine, second, scan_in_handler, seen, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  CHECK(strcmp(seen[0].keys, "a=1,bb=9,c=3,") == 0);
  CHECK(strcmp(seen[1].keys, "d=4,c=3,") == 0);
  CHECK(strcmp(seen[2].keys, "bb=9,") == 0);
  /* The committed state, from one snapshot. */
  scan_seen committed;
  memset(&committed, 0, sizeof committed);
  CHECK_OK(idem_engine_scan_state(engine, "", 0, NULL, 0, 0, 0, collect,
                                  &committed));
  CHECK(strcmp(committed.keys, "a=1,bb=9,c=3,d=4,") == 0);
  CHECK_CODE(
      idem_engine_scan_state(engine, "b", 1, "a", 1, 0, 0, collect, &committed),
      IDEM_INVALID_ARGUMENT);
  CHECK_CODE(
      idem_engine_scan_state(NULL, "", 0, NULL, 0, 0, 0, collect, &committed),
      IDEM_INVALID_ARGUMENT);
  idem_message_free(first);
  idem_message_free(second);
  idem_engine_free(engine);
}

/* 8-byte little-endian. */
static void int64_bytes(int64_t v, char out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = (char)((uint64_t)v >> (8 * i));
}
static int64_t int64_of(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= (uint64_t)(unsigned char)p[i] << (8 * i);
  return (int64_t)v;
}

static int merge_and_range(void* user, const idem_message* message,
                           idem_txn* txn) {
  (void)user;
  (void)message;
  char five[8];
  int64_bytes(5, five);
  CHECK_OK(idem_txn_merge(txn, "n", 1, IDEM_MERGE_ADD_INT64, five, 8));
  CHECK_OK(idem_txn_merge(txn, "n", 1, IDEM_MERGE_ADD_INT64, five, 8));
  CHECK_OK(idem_txn_merge(txn, "log", 3, IDEM_MERGE_APPEND, "x", 1));
  const char* value = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_OK(idem_txn_get(txn, "n", 1, &value, &size, &found));
  CHECK(found == 1 && size == 8 && int64_of(value) == 10);
  CHECK_OK(idem_txn_delete_range(txn, "b", 1, "d", 1));
  return IDEM_HANDLER_COMMIT;
}

static int bad_merge(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_CODE(idem_txn_merge(txn, "n", 1, IDEM_MERGE_MAX_INT64, "short", 5),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_merge(txn, "n", 1, (idem_merge_op)99, "x", 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_merge(txn, "n", 1, (idem_merge_op)1000, "x", 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_delete_range(txn, "b", 1, NULL, 0),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_txn_merge(txn, NULL, 1, IDEM_MERGE_APPEND, "x", 1),
             IDEM_INVALID_ARGUMENT);
  CHECK_OK(idem_txn_put(txn, "written", 7, "x", 1));
  return IDEM_HANDLER_COMMIT; /* the invalid merges fail the message anyway */
}

IDEM_TEST(MergesFoldAndRangeDeletionsRemoveTheirRange) {
  idem_engine* engine = open_store(NULL);
  idem_message* first = message_with_id("first");
  idem_message* second = message_with_id("second");
  idem_message* third = message_with_id("third");
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, first, put_abcd, NULL, &r));
  idem_result_free(r);
  CHECK_OK(idem_engine_process(engine, second, merge_and_range, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_PROCESSED);
  idem_result_free(r);
  char* n = NULL;
  size_t size = 0;
  int found = 0;
  CHECK_OK(idem_engine_get_state(engine, "n", 1, &n, &size, &found));
  CHECK(found == 1 && size == 8 && int64_of(n) == 10);
  idem_free(n);
  scan_seen committed;
  memset(&committed, 0, sizeof committed);
  CHECK_OK(idem_engine_scan_state(engine, "a", 1, "e", 1, 0, 0, collect,
                                  &committed));
  CHECK(strcmp(committed.keys, "a=1,d=4,") == 0);
  /* Invalid merges and ranges: refused, and the message fails. */
  CHECK_OK(idem_engine_process(engine, third, bad_merge, NULL, &r));
  CHECK(idem_result_outcome(r) == IDEM_OUTCOME_FAILED);
  CHECK(idem_result_error_code(r) == IDEM_INVALID_ARGUMENT);
  idem_result_free(r);
  CHECK(state_of(engine, "written") == NULL);
  idem_message_free(first);
  idem_message_free(second);
  idem_message_free(third);
  idem_engine_free(engine);
}

static int keep_txn_for_state(void* user, const idem_message* message,
                              idem_txn* txn) {
  (void)message;
  *(idem_txn**)user = txn;
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(StateCallsOnAKeptTxnFailCleanly) {
  idem_engine* engine = open_store(NULL);
  idem_message* m = message_with_id("a");
  idem_txn* kept = NULL;
  idem_result* r = NULL;
  CHECK_OK(idem_engine_process(engine, m, keep_txn_for_state, &kept, &r));
  idem_result_free(r);
  scan_seen seen;
  memset(&seen, 0, sizeof seen);
  CHECK_CODE(idem_txn_scan(kept, "", 0, NULL, 0, 0, 0, collect, &seen),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_scan_prefix(kept, "", 0, 0, 0, collect, &seen),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_merge(kept, "n", 1, IDEM_MERGE_APPEND, "x", 1),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_delete_range(kept, "a", 1, "b", 1),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_scan(NULL, "", 0, NULL, 0, 0, 0, collect, &seen),
             IDEM_INVALID_ARGUMENT);
  idem_message_free(m);
  idem_engine_free(engine);
}
