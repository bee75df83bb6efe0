/* The C API's time calls (include/idem/c.h, "Time, timers and state TTL";
 * docs/state.md) from plain C11: event time and stream time, timers set,
 * cancelled, found and fired through a C timer handler (its failures
 * included), values that expire, and the failure paths of each call.
 * Runner and helpers: tests/c_api_testing.{h,c}. */

#define _XOPEN_SOURCE 700

#include <time.h>

#include "tests/c_api_testing.h"

/* An event time well behind the engine's clock (the clock bounds how far
 * ahead one may advance stream time), and one second in microseconds. */
#define BASE_US ((int64_t)1600000000 * 1000000)
#define SECOND_US ((int64_t)1000000)

/* A message of partition ("events", 0) with ID `id` and event time `us`. */
static idem_message* event_message(const char* id, int64_t us) {
  idem_message* m = message_with_id(id);
  CHECK_OK(idem_message_set_source(m, "events", 6));
  CHECK_OK(idem_message_set_event_time_us(m, us));
  return m;
}

/* The engine's counters. */
static idem_stats stats_of(idem_engine* engine) {
  idem_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK_OK(idem_engine_stats(engine, &stats));
  return stats;
}

/* Whether ("events", 0) has a timer in `domain`. */
static int has_timer(idem_engine* engine, idem_time_domain domain) {
  idem_timer* timer = NULL;
  CHECK_OK(idem_engine_next_timer(engine, "events", 6, 0, domain, &timer));
  idem_timer_free(timer);
  return timer != NULL;
}

static int64_t committed_stream_time(idem_engine* engine) {
  int64_t us = 0;
  CHECK_OK(idem_engine_stream_time(engine, "events", 6, 0, &us));
  return us;
}

static void sleep_ms(long ms) {
  struct timespec t = {0, ms * 1000000L};
  nanosleep(&t, NULL);
}

/* Stores the handler's stream time in *(int64_t*)user. */
static int read_stream_time(void* user, const idem_message* message,
                            idem_txn* txn) {
  (void)message;
  CHECK_OK(idem_txn_stream_time(txn, (int64_t*)user));
  CHECK_CODE(idem_txn_stream_time(txn, NULL), IDEM_INVALID_ARGUMENT);
  return IDEM_HANDLER_COMMIT;
}

/* Sets the event-time timer "w" at *(int64_t*)user with payload "p". */
static int set_event_timer(void* user, const idem_message* message,
                           idem_txn* txn) {
  (void)message;
  CHECK_OK(idem_txn_set_timer(txn, "w", 1, IDEM_TIME_EVENT, *(int64_t*)user,
                              "p", 1));
  return IDEM_HANDLER_COMMIT;
}

/* What a timer handler saw and is told to do. */
typedef struct fire_log {
  int calls;
  char keys[64];
  int64_t fire_at_us;
  int64_t stream_time_us;
  int result;          /* what the handler returns */
  idem_code error;     /* set with idem_txn_set_error unless IDEM_OK */
  idem_txn* kept;      /* the last txn, kept past the call */
  idem_engine* engine; /* to call fire_timers from inside the handler */
} fire_log;

/* Logs the fire, writes "fired/<key>" = payload and emits to "closed". */
static int on_fire(void* user, const idem_timer* timer, idem_txn* txn) {
  fire_log* log = (fire_log*)user;
  ++log->calls;
  size_t key_size = 0;
  size_t payload_size = 0;
  const char* key = idem_timer_key(timer, &key_size);
  const char* payload = idem_timer_payload(timer, &payload_size);
  strncat(log->keys, key, key_size);
  log->fire_at_us = idem_timer_fire_at_us(timer);
  CHECK_OK(idem_txn_stream_time(txn, &log->stream_time_us));
  char state_key[32];
  int n =
      snprintf(state_key, sizeof state_key, "fired/%.*s", (int)key_size, key);
  CHECK_OK(idem_txn_put(txn, state_key, (size_t)n, payload, payload_size));
  CHECK_OK(
      idem_txn_emit(txn, "closed", 6, key, key_size, payload, payload_size));
  log->kept = txn;
  if (log->engine != NULL) {
    size_t fired = 0;
    CHECK_CODE(idem_engine_fire_timers(
                   log->engine, "events", 6, 0, IDEM_TIME_EVENT,
                   IDEM_TIME_INFINITE_FUTURE, 10, on_fire, user, &fired),
               IDEM_FAILED_PRECONDITION);
  }
  if (log->error != IDEM_OK) idem_txn_set_error(txn, log->error, "not now");
  return log->result;
}

static size_t fire(idem_engine* engine, idem_time_domain domain,
                   fire_log* log) {
  size_t fired = 99;
  CHECK_OK(idem_engine_fire_timers(engine, "events", 6, 0, domain,
                                   IDEM_TIME_INFINITE_FUTURE, 10, on_fire, log,
                                   &fired));
  return fired;
}

/* ---- Event time and stream time ---- */

IDEM_TEST(EventTimeAdvancesTheStreamTimeItsHandlerAndTheEngineSee) {
  CHECK(idem_c_api_minor() == IDEM_C_API_MINOR);
  idem_engine* engine = open_store(NULL);
  CHECK(committed_stream_time(engine) == IDEM_TIME_INFINITE_PAST);
  idem_message* m = event_message("a", BASE_US);
  CHECK(idem_message_event_time_us(m) == BASE_US);
  int64_t seen = 0;
  CHECK(process_message(engine, m, read_stream_time, &seen) ==
        IDEM_OUTCOME_PROCESSED);
  CHECK(seen == BASE_US);
  CHECK(committed_stream_time(engine) == BASE_US);
  /* An earlier event time leaves it; none leaves it. */
  CHECK(process_message(engine, event_message("b", BASE_US - SECOND_US),
                        read_stream_time, &seen) == IDEM_OUTCOME_PROCESSED);
  CHECK(seen == BASE_US);
  idem_message* none = message_with_id("c");
  CHECK(idem_message_event_time_us(none) == IDEM_TIME_INFINITE_PAST);
  CHECK_OK(idem_message_set_source(none, "events", 6));
  CHECK(process_message(engine, none, read_stream_time, &seen) ==
        IDEM_OUTCOME_PROCESSED);
  CHECK(committed_stream_time(engine) == BASE_US);
  idem_engine_free(engine);
}

IDEM_TEST(TimeCallsRefuseBadInput) {
  idem_engine* engine = open_store(NULL);
  CHECK_CODE(idem_message_set_event_time_us(NULL, BASE_US),
             IDEM_INVALID_ARGUMENT);
  CHECK(idem_message_event_time_us(NULL) == IDEM_TIME_INFINITE_PAST);
  /* An infinite event time is refused before any handler runs. */
  idem_message* m = event_message("a", IDEM_TIME_INFINITE_FUTURE);
  int64_t seen = 0;
  idem_result* r = NULL;
  CHECK_CODE(idem_engine_process(engine, m, read_stream_time, &seen, &r),
             IDEM_INVALID_ARGUMENT);
  CHECK(r == NULL && seen == 0);
  idem_message_free(m);
  int64_t us = 0;
  CHECK_CODE(idem_engine_stream_time(engine, "events", 6, 0, NULL),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_stream_time(engine, "", 0, 0, &us),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_stream_time(engine, "events", 6, -1, &us),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_stream_time(engine, NULL, 3, 0, &us),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_stream_time(NULL, "events", 6, 0, &us),
             IDEM_INVALID_ARGUMENT);
  idem_timer* timer = NULL;
  CHECK_CODE(idem_engine_next_timer(engine, "events", 6, 0, (idem_time_domain)7,
                                    &timer),
             IDEM_INVALID_ARGUMENT);
  CHECK(contains(idem_last_error(), "idem_time_domain"));
  CHECK_CODE(
      idem_engine_next_timer(engine, "events", 6, 0, IDEM_TIME_EVENT, NULL),
      IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_next_timer(engine, "", 0, 0, IDEM_TIME_EVENT, &timer),
             IDEM_INVALID_ARGUMENT);
  fire_log log;
  memset(&log, 0, sizeof log);
  size_t fired = 0;
  CHECK_CODE(idem_engine_fire_timers(engine, "events", 6, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 0, on_fire,
                                     &log, &fired),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_fire_timers(
                 engine, "events", 6, 0, (idem_time_domain)-1,
                 IDEM_TIME_INFINITE_FUTURE, 10, on_fire, &log, &fired),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_fire_timers(engine, "events", 6, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, NULL, &log,
                                     &fired),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_fire_timers(engine, "events", 6, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, on_fire,
                                     &log, NULL),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_fire_timers(engine, "events", 6, -1, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, on_fire,
                                     &log, &fired),
             IDEM_INVALID_ARGUMENT);
  CHECK_CODE(idem_engine_fire_timers(engine, "", 0, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, on_fire,
                                     &log, &fired),
             IDEM_INVALID_ARGUMENT);
  CHECK(log.calls == 0);
  CHECK_OK(idem_engine_close(engine));
  CHECK_CODE(idem_engine_fire_timers(engine, "events", 6, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, on_fire,
                                     &log, &fired),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(
      idem_engine_next_timer(engine, "events", 6, 0, IDEM_TIME_EVENT, &timer),
      IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_stream_time(engine, "events", 6, 0, &us),
             IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_engine_fire_timers(NULL, "events", 6, 0, IDEM_TIME_EVENT,
                                     IDEM_TIME_INFINITE_FUTURE, 10, on_fire,
                                     &log, &fired),
             IDEM_INVALID_ARGUMENT);
  idem_engine_free(engine);
  /* Getters on a NULL timer. */
  size_t size = 1;
  CHECK(idem_timer_key(NULL, &size) == NULL && size == 0);
  CHECK(idem_timer_payload(NULL, &size) == NULL && size == 0);
  CHECK(idem_timer_source(NULL, &size) == NULL && size == 0);
  CHECK(idem_timer_partition(NULL) == 0);
  CHECK(idem_timer_domain(NULL) == IDEM_TIME_EVENT);
  CHECK(idem_timer_fire_at_us(NULL) == IDEM_TIME_INFINITE_PAST);
  idem_timer_free(NULL);
}

/* ---- Timers ---- */

IDEM_TEST(EventTimerFiresOnceStreamTimeReachesIt) {
  idem_engine* engine = open_store(NULL);
  int64_t fire_at = BASE_US + 10 * SECOND_US;
  CHECK(process_message(engine, event_message("set", BASE_US), set_event_timer,
                        &fire_at) == IDEM_OUTCOME_PROCESSED);
  idem_timer* timer = NULL;
  CHECK_OK(
      idem_engine_next_timer(engine, "events", 6, 0, IDEM_TIME_EVENT, &timer));
  CHECK(timer != NULL);
  size_t size = 0;
  CHECK(memcmp(idem_timer_key(timer, &size), "w", 1) == 0 && size == 1);
  CHECK(memcmp(idem_timer_payload(timer, &size), "p", 1) == 0 && size == 1);
  CHECK(memcmp(idem_timer_source(timer, &size), "events", 6) == 0 && size == 6);
  CHECK(idem_timer_partition(timer) == 0);
  CHECK(idem_timer_domain(timer) == IDEM_TIME_EVENT);
  CHECK(idem_timer_fire_at_us(timer) == fire_at);
  idem_timer_free(timer);
  /* No processing-time timer. */
  CHECK(!has_timer(engine, IDEM_TIME_PROCESSING));

  fire_log log;
  memset(&log, 0, sizeof log);
  CHECK(fire(engine, IDEM_TIME_EVENT, &log) == 0); /* stream time is BASE */
  CHECK(log.calls == 0);
  CHECK(process_message(engine, event_message("late", fire_at), increment,
                        NULL) == IDEM_OUTCOME_PROCESSED);
  /* up_to below the timer holds it back. */
  size_t fired = 99;
  CHECK_OK(idem_engine_fire_timers(engine, "events", 6, 0, IDEM_TIME_EVENT,
                                   fire_at - 1, 10, on_fire, &log, &fired));
  CHECK(fired == 0 && log.calls == 0);
  log.engine = engine;
  CHECK(fire(engine, IDEM_TIME_EVENT, &log) == 1);
  CHECK(log.calls == 1 && strcmp(log.keys, "w") == 0);
  CHECK(log.fire_at_us == fire_at && log.stream_time_us == fire_at);
  /* The txn is dead once its handler returned. */
  CHECK_CODE(idem_txn_put(log.kept, "x", 1, "1", 1), IDEM_FAILED_PRECONDITION);
  char* value = state_of(engine, "fired/w");
  CHECK(value != NULL && strcmp(value, "p") == 0);
  idem_free(value);
  idem_outbox_batch* batch = NULL;
  CHECK_OK(idem_engine_read_outbox(engine, 0, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 1);
  CHECK(memcmp(idem_outbox_destination(batch, 0, &size), "closed", 6) == 0);
  idem_outbox_batch_free(batch);
  /* Fired once: gone. */
  CHECK(fire(engine, IDEM_TIME_EVENT, &log) == 0 && log.calls == 1);
  CHECK(!has_timer(engine, IDEM_TIME_EVENT));
  const idem_stats stats = stats_of(engine);
  CHECK(stats.timers_fired == 1 && stats.timers_dead_lettered == 0);
  idem_engine_free(engine);
}

/* Sets the processing-time timers "a" (at *(int64_t*)user) and "b", then
 * cancels "b". */
static int set_processing_timers(void* user, const idem_message* message,
                                 idem_txn* txn) {
  (void)message;
  const int64_t at = *(int64_t*)user;
  CHECK_OK(idem_txn_set_timer(txn, "a", 1, IDEM_TIME_PROCESSING, at, NULL, 0));
  CHECK_OK(idem_txn_set_timer(txn, "b", 1, IDEM_TIME_PROCESSING, at, "x", 1));
  CHECK_OK(idem_txn_cancel_timer(txn, "b", 1));
  CHECK_OK(idem_txn_cancel_timer(txn, "never-set", 9));
  CHECK_CODE(idem_txn_cancel_timer(txn, NULL, 1), IDEM_INVALID_ARGUMENT);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(ProcessingTimerFiresByTheEngineClockAndCancelledOneNever) {
  idem_engine* engine = open_store(NULL);
  /* Long past by the engine's clock; an event time plays no part. */
  int64_t at = BASE_US;
  CHECK(process_message(engine, event_message("set", IDEM_TIME_INFINITE_PAST),
                        set_processing_timers, &at) == IDEM_OUTCOME_PROCESSED);
  fire_log log;
  memset(&log, 0, sizeof log);
  CHECK(fire(engine, IDEM_TIME_EVENT, &log) == 0);
  CHECK(fire(engine, IDEM_TIME_PROCESSING, &log) == 1);
  CHECK(log.calls == 1 && strcmp(log.keys, "a") == 0);
  CHECK(log.fire_at_us == BASE_US);
  CHECK(!has_timer(engine, IDEM_TIME_PROCESSING));
  idem_engine_free(engine);
}

/* What bad_timer does, chosen by *(int*)user. */
enum bad_timer_case {
  FIRE_AT_INFINITE_FUTURE,
  FIRE_AT_INFINITE_PAST,
  UNKNOWN_DOMAIN,
  NULL_KEY,
  AT_STREAM_TIME
};

/* Makes one bad SetTimer call, checks its code and returns
 * IDEM_HANDLER_COMMIT whatever it got. */
static int bad_timer(void* user, const idem_message* message, idem_txn* txn) {
  (void)message;
  CHECK_OK(idem_txn_put(txn, "written", 7, "1", 1));
  switch (*(int*)user) {
    case FIRE_AT_INFINITE_FUTURE:
      CHECK_CODE(idem_txn_set_timer(txn, "t", 1, IDEM_TIME_PROCESSING,
                                    IDEM_TIME_INFINITE_FUTURE, NULL, 0),
                 IDEM_INVALID_ARGUMENT);
      break;
    case FIRE_AT_INFINITE_PAST:
      CHECK_CODE(idem_txn_set_timer(txn, "t", 1, IDEM_TIME_EVENT,
                                    IDEM_TIME_INFINITE_PAST, NULL, 0),
                 IDEM_INVALID_ARGUMENT);
      break;
    case UNKNOWN_DOMAIN:
      CHECK_CODE(idem_txn_set_timer(txn, "t", 1, (idem_time_domain)7, BASE_US,
                                    NULL, 0),
                 IDEM_INVALID_ARGUMENT);
      CHECK(contains(idem_last_error(), "domain 7"));
      break;
    case NULL_KEY:
      CHECK_CODE(
          idem_txn_set_timer(txn, NULL, 1, IDEM_TIME_EVENT, BASE_US, NULL, 0),
          IDEM_INVALID_ARGUMENT);
      CHECK_CODE(
          idem_txn_set_timer(txn, "t", 1, IDEM_TIME_EVENT, BASE_US, NULL, 2),
          IDEM_INVALID_ARGUMENT);
      break;
    case AT_STREAM_TIME:
      CHECK_CODE(
          idem_txn_set_timer(txn, "t", 1, IDEM_TIME_EVENT, BASE_US, NULL, 0),
          IDEM_OUT_OF_RANGE);
      break;
  }
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(SetTimerRefusesBadTimesAndDomainsFailingTheMessage) {
  idem_engine* engine = open_store(NULL);
  const int failing[] = {FIRE_AT_INFINITE_FUTURE, FIRE_AT_INFINITE_PAST,
                         UNKNOWN_DOMAIN};
  for (size_t i = 0; i < sizeof failing / sizeof failing[0]; ++i) {
    char id[16];
    snprintf(id, sizeof id, "bad-%zu", i);
    int which = failing[i];
    CHECK(process_message(engine, event_message(id, BASE_US), bad_timer,
                          &which) == IDEM_OUTCOME_FAILED);
  }
  char* written = state_of(engine, "written");
  CHECK(written == NULL); /* nothing of the failed messages committed */
  /* A NULL key is refused by the call alone; a past event time too. */
  int which = NULL_KEY;
  CHECK(process_message(engine, event_message("null-key", BASE_US), bad_timer,
                        &which) == IDEM_OUTCOME_PROCESSED);
  which = AT_STREAM_TIME;
  CHECK(process_message(engine, event_message("late", BASE_US), bad_timer,
                        &which) == IDEM_OUTCOME_PROCESSED);
  CHECK(!has_timer(engine, IDEM_TIME_EVENT));
  idem_engine_free(engine);
}

/* Sets a timer in a message without a source. */
static int timer_without_source(void* user, const idem_message* message,
                                idem_txn* txn) {
  (void)user;
  (void)message;
  CHECK_CODE(
      idem_txn_set_timer(txn, "t", 1, IDEM_TIME_PROCESSING, BASE_US, NULL, 0),
      IDEM_FAILED_PRECONDITION);
  CHECK_CODE(idem_txn_cancel_timer(txn, "t", 1), IDEM_FAILED_PRECONDITION);
  int64_t us = 0;
  CHECK_OK(idem_txn_stream_time(txn, &us));
  CHECK(us == IDEM_TIME_INFINITE_PAST);
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(TimersNeedAMessageWithASource) {
  idem_engine* engine = open_store(NULL);
  CHECK(process_id(engine, "no-source", timer_without_source, NULL) ==
        IDEM_OUTCOME_PROCESSED);
  idem_engine_free(engine);
}

IDEM_TEST(TransientTimerFailureKeepsTheTimerWithoutItsEffects) {
  idem_engine* engine = open_store(NULL);
  int64_t at = BASE_US;
  CHECK(process_message(engine, event_message("set", IDEM_TIME_INFINITE_PAST),
                        set_processing_timers, &at) == IDEM_OUTCOME_PROCESSED);
  fire_log log;
  memset(&log, 0, sizeof log);
  log.result = 1;
  log.error = IDEM_UNAVAILABLE;
  size_t fired = 99;
  CHECK_CODE(idem_engine_fire_timers(
                 engine, "events", 6, 0, IDEM_TIME_PROCESSING,
                 IDEM_TIME_INFINITE_FUTURE, 10, on_fire, &log, &fired),
             IDEM_UNAVAILABLE);
  CHECK(contains(idem_last_error(), "not now"));
  CHECK(fired == 0 && log.calls == 1);
  CHECK(state_of(engine, "fired/a") == NULL);
  /* Without a set error: IDEM_UNKNOWN naming the return value. */
  log.error = IDEM_OK;
  log.result = 7;
  CHECK_CODE(idem_engine_fire_timers(
                 engine, "events", 6, 0, IDEM_TIME_PROCESSING,
                 IDEM_TIME_INFINITE_FUTURE, 10, on_fire, &log, &fired),
             IDEM_UNKNOWN);
  CHECK(contains(idem_last_error(), "returned 7"));
  CHECK(has_timer(engine, IDEM_TIME_PROCESSING));
  const idem_stats stats = stats_of(engine);
  CHECK(stats.timers_fired == 0 && stats.timer_failures == 2);
  /* It fires on a later call. */
  log.result = IDEM_HANDLER_COMMIT;
  CHECK(fire(engine, IDEM_TIME_PROCESSING, &log) == 1);
  char* value = state_of(engine, "fired/a");
  CHECK(value != NULL && strcmp(value, "") == 0);
  idem_free(value);
  idem_engine_free(engine);
}

IDEM_TEST(PermanentTimerFailureDeadLettersTheTimer) {
  idem_engine* engine = open_store(NULL);
  int64_t at = BASE_US;
  CHECK(process_message(engine, event_message("set", IDEM_TIME_INFINITE_PAST),
                        set_processing_timers, &at) == IDEM_OUTCOME_PROCESSED);
  fire_log log;
  memset(&log, 0, sizeof log);
  log.result = IDEM_HANDLER_PERMANENT;
  log.error = IDEM_DATA_LOSS;
  CHECK(fire(engine, IDEM_TIME_PROCESSING, &log) == 1);
  CHECK(log.calls == 1);
  CHECK(state_of(engine, "fired/a") == NULL);
  idem_outbox_batch* batch = NULL;
  CHECK_OK(idem_engine_read_outbox(engine, 0, 10, &batch));
  CHECK(idem_outbox_batch_size(batch) == 0);
  idem_outbox_batch_free(batch);
  CHECK(!has_timer(engine, IDEM_TIME_PROCESSING));
  const idem_stats stats = stats_of(engine);
  CHECK(stats.timers_fired == 1 && stats.timers_dead_lettered == 1);
  idem_engine_free(engine);
}

/* ---- State that expires ---- */

/* Writes "short" with a 1 ms TTL and "long" with a one-hour one, and checks
 * that a TTL of 0 or less is refused. */
static int put_expiring(void* user, const idem_message* message,
                        idem_txn* txn) {
  (void)message;
  CHECK_OK(idem_txn_put_with_ttl(txn, "short", 5, "s", 1, 1));
  CHECK_OK(idem_txn_put_with_ttl(txn, "long", 4, "l", 1, 3600 * 1000));
  CHECK_CODE(idem_txn_put_with_ttl(txn, NULL, 1, "v", 1, 1000),
             IDEM_INVALID_ARGUMENT);
  if (user != NULL) {
    CHECK_CODE(idem_txn_put_with_ttl(txn, "zero", 4, "z", 1, *(int64_t*)user),
               IDEM_INVALID_ARGUMENT);
  }
  return IDEM_HANDLER_COMMIT;
}

IDEM_TEST(PutWithTtlValuesExpireAndBadTtlsFailTheMessage) {
  idem_engine* engine = open_store(NULL);
  CHECK(process_id(engine, "put", put_expiring, NULL) ==
        IDEM_OUTCOME_PROCESSED);
  sleep_ms(20);
  CHECK(state_of(engine, "short") == NULL);
  char* value = state_of(engine, "long");
  CHECK(value != NULL && strcmp(value, "l") == 0);
  idem_free(value);
  const int64_t bad[] = {0, -5};
  for (size_t i = 0; i < 2; ++i) {
    char id[16];
    snprintf(id, sizeof id, "bad-%zu", i);
    int64_t ttl = bad[i];
    CHECK(process_id(engine, id, put_expiring, &ttl) == IDEM_OUTCOME_FAILED);
  }
  idem_engine_free(engine);
}

IDEM_TEST(StateTtlOptionExpiresEveryWrite) {
  CHECK_CODE(idem_options_set_state_ttl_ms(NULL, 1), IDEM_INVALID_ARGUMENT);
  idem_options* options = idem_options_new();
  CHECK_OK(idem_options_set_state_ttl_ms(options, -1));
  idem_engine* engine = NULL;
  CHECK_CODE(idem_engine_open(store_path, options, &engine),
             IDEM_INVALID_ARGUMENT);
  CHECK(engine == NULL);
  CHECK_OK(idem_options_set_state_ttl_ms(options, 1));
  engine = open_store(options);
  int calls = 0;
  CHECK(process_id(engine, "a", put_payload, &calls) == IDEM_OUTCOME_PROCESSED);
  sleep_ms(20);
  CHECK(state_of(engine, "k") == NULL);
  idem_engine_free(engine);
  /* 0: no TTL, the default, on the same store. */
  CHECK_OK(idem_options_set_state_ttl_ms(options, 0));
  engine = open_store(options);
  CHECK(process_id(engine, "b", put_payload, &calls) == IDEM_OUTCOME_PROCESSED);
  sleep_ms(20);
  char* value = state_of(engine, "k");
  CHECK(value != NULL);
  idem_free(value);
  idem_engine_free(engine);
  idem_options_free(options);
}
