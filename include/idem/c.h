/* idem's C API: the engine (idem/engine.h) for C and for languages that bind
 * C (Python, Go, Rust, ...). Stable: within one IDEM_C_API_VERSION, a
 * function keeps its name, signature and meaning, handles stay opaque and
 * enum values keep their numbers; new functions and enum values may be
 * added. A program built against one version runs against a library of the
 * same IDEM_C_API_VERSION (check idem_c_api_version() at run time).
 *
 * Thread-safety: an idem_engine is safe for concurrent access from multiple
 * threads without external synchronization (as idem::Engine); every other
 * handle (options, message, result, result list, outbox batch) is not
 * thread-safe: one thread at a time, or const calls only. An idem_txn is
 * valid only inside the handler call that received it, on that call's
 * thread.
 *
 * Errors: every call that can fail returns an idem_code (absl's status
 * codes, same numbers); IDEM_OK is 0. On failure, idem_last_error() gives
 * the message text for the calling thread. No C++ exception ever leaves a
 * call: an out-of-memory becomes IDEM_RESOURCE_EXHAUSTED, anything else
 * thrown IDEM_INTERNAL. A NULL handle where one is required is
 * IDEM_INVALID_ARGUMENT; getters on a NULL handle return an empty value (0,
 * NULL with size 0, "", -1 for an offset, IDEM_OUTCOME_FAILED for an
 * outcome, INT64_MIN for a time).
 *
 * Memory ownership, spelled out on each call:
 *   - "caller frees with X": the caller owns the returned handle or buffer
 *     and releases it with X (each X accepts NULL);
 *   - "view": a pointer into a handle, valid until the handle is freed or
 *     changed (each call says which), never freed by the caller;
 *   - byte arguments (const void* data, size_t size) are read during the
 *     call only, unless the call says otherwise; size 0 allows data NULL.
 *
 * Scans, merges and range deletions are here ("State beyond single keys"),
 * and event time, timers and state that expires ("Time, timers and state
 * TTL"), added under the same version (IDEM_C_API_MINOR 1).
 *
 * Times are microseconds since the Unix epoch (int64_t, names ending in
 * _us): IDEM_TIME_INFINITE_PAST (INT64_MIN) stands for absl::InfinitePast()
 * ("none"), IDEM_TIME_INFINITE_FUTURE (INT64_MAX) for
 * absl::InfiniteFuture(). */

#ifndef IDEM_C_H_
#define IDEM_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API's version: bumped only by a change that breaks a program built
 * against an older one. */
#define IDEM_C_API_VERSION 1
/* Bumped, within one IDEM_C_API_VERSION, by each release that adds
 * functions, enum values or appended struct fields, so a program can check
 * at compile time that what it calls is declared (and at run time with
 * idem_c_api_minor() that the linked library has it); back to 0 when
 * IDEM_C_API_VERSION is bumped. 0: the first API with scans, merges and
 * range deletions; 1: event time, stream time, timers, state TTL, and the
 * timer counters of idem_stats. */
#define IDEM_C_API_MINOR 1

/* The API version of the library linked at run time (IDEM_C_API_VERSION as
 * it was built). */
int idem_c_api_version(void);
/* The IDEM_C_API_MINOR of the library linked at run time: a program built
 * against a higher minor than this must not call what that minor added. */
int idem_c_api_minor(void);
/* The library's version, "MAJOR.MINOR.PATCH" (IDEM_VERSION of
 * idem/version.h). View of a static string: never freed. */
const char* idem_version(void);

/* ---- Status codes ---- */

/* absl::StatusCode, with the same numbers. */
typedef enum idem_code {
  IDEM_OK = 0,
  IDEM_CANCELLED = 1,
  IDEM_UNKNOWN = 2,
  IDEM_INVALID_ARGUMENT = 3,
  IDEM_DEADLINE_EXCEEDED = 4,
  IDEM_NOT_FOUND = 5,
  IDEM_ALREADY_EXISTS = 6,
  IDEM_PERMISSION_DENIED = 7,
  IDEM_RESOURCE_EXHAUSTED = 8,
  IDEM_FAILED_PRECONDITION = 9,
  IDEM_ABORTED = 10,
  IDEM_OUT_OF_RANGE = 11,
  IDEM_UNIMPLEMENTED = 12,
  IDEM_INTERNAL = 13,
  IDEM_UNAVAILABLE = 14,
  IDEM_DATA_LOSS = 15,
  IDEM_UNAUTHENTICATED = 16
} idem_code;

/* The code's name as absl spells it ("INVALID_ARGUMENT"), or "UNKNOWN" for
 * a number that is no code. View of a static string: never freed. */
const char* idem_code_name(idem_code code);

/* The message of the last call on this thread that returned a code other
 * than IDEM_OK ("" if none failed yet). View: valid until the next idem_
 * call on this thread that fails. Calls that succeed leave it as it is. */
const char* idem_last_error(void);

/* ---- Handles ---- */

typedef struct idem_engine idem_engine;
typedef struct idem_options idem_options;
typedef struct idem_message idem_message;
typedef struct idem_txn idem_txn;
typedef struct idem_result idem_result;
typedef struct idem_result_list idem_result_list;
typedef struct idem_outbox_batch idem_outbox_batch;
typedef struct idem_timer idem_timer;

/* The ends of time (see "Times" at the top). */
#define IDEM_TIME_INFINITE_PAST INT64_MIN
#define IDEM_TIME_INFINITE_FUTURE INT64_MAX

/* Frees a buffer the API allocated (idem_engine_get_state). NULL: no-op. */
void idem_free(void* buffer);

/* ---- Options (idem/options.h) ---- */

typedef enum idem_durability {
  IDEM_DURABILITY_SYNC = 0,    /* a returned outcome is durable */
  IDEM_DURABILITY_BUFFERED = 1 /* durable once wait_durable returns */
} idem_durability;

typedef enum idem_dedupe_scope {
  IDEM_DEDUPE_SCOPE_STORE = 0,    /* an ID names one message in the store */
  IDEM_DEDUPE_SCOPE_PARTITION = 1 /* one per (source, partition) */
} idem_dedupe_scope;

/* New options with idem::Options' defaults. Caller frees with
 * idem_options_free. NULL only if memory ran out. */
idem_options* idem_options_new(void);
void idem_options_free(idem_options* options);

/* Setters. Each returns IDEM_INVALID_ARGUMENT for a NULL handle, a value
 * out of its enum or a negative size; other bad values (a zero window, a
 * cache over 1 TiB...) are refused by idem_engine_open, as idem::Engine::Open
 * refuses them. Durations are in milliseconds. */
idem_code idem_options_set_dedupe_window_ms(idem_options* options,
                                            int64_t window_ms);
idem_code idem_options_set_durability(idem_options* options,
                                      idem_durability durability);
idem_code idem_options_set_dedupe_scope(idem_options* options,
                                        idem_dedupe_scope scope);
idem_code idem_options_set_create_if_missing(idem_options* options, int on);
idem_code idem_options_set_read_only(idem_options* options, int on);
idem_code idem_options_set_detect_conflicts(idem_options* options, int on);
idem_code idem_options_set_refresh_on_duplicate(idem_options* options, int on);
idem_code idem_options_set_block_cache_bytes(idem_options* options,
                                             int64_t bytes);
idem_code idem_options_set_write_buffer_bytes(idem_options* options,
                                              int64_t bytes);
idem_code idem_options_set_bloom_bits_per_key(idem_options* options, int bits);
idem_code idem_options_set_max_background_jobs(idem_options* options, int jobs);
idem_code idem_options_set_expiry_buckets(idem_options* options, int buckets);
/* How long every state value lives after its last write (Options::
 * state_ttl, docs/state.md "State that expires"): 0 is none (the default);
 * a negative value is refused by idem_engine_open (IDEM_INVALID_ARGUMENT).
 * idem_txn_put_with_ttl overrides it for one write. */
idem_code idem_options_set_state_ttl_ms(idem_options* options, int64_t ttl_ms);

/* ---- Messages (idem/message.h) ---- */

/* The longest accepted message ID and source, in bytes. */
#define IDEM_MAX_ID_BYTES 1024
#define IDEM_MAX_SOURCE_BYTES 1024

/* A new, empty message (no ID yet: processing it fails with
 * IDEM_INVALID_ARGUMENT until an ID is set; partition 0, offset -1, ttl 0 =
 * the dedupe window). The message copies every byte it is given, so the
 * caller's buffers may go right after each setter. Caller frees with
 * idem_message_free, after the process calls that use it have returned. */
idem_message* idem_message_new(void);
void idem_message_free(idem_message* message);

/* Setters: copy the bytes. IDEM_INVALID_ARGUMENT for a NULL handle or NULL
 * data with a non-zero size; the ID's and source's lengths and the offset
 * and partition ranges are checked when the message is processed (as
 * idem::Engine::Process checks them), so that one error path covers all. */
idem_code idem_message_set_id(idem_message* message, const void* id,
                              size_t size);
idem_code idem_message_set_payload(idem_message* message, const void* payload,
                                   size_t size);
idem_code idem_message_set_source(idem_message* message, const void* source,
                                  size_t size);
idem_code idem_message_set_partition(idem_message* message, int32_t partition);
idem_code idem_message_set_offset(idem_message* message, int64_t offset);
idem_code idem_message_set_ttl_ms(idem_message* message, int64_t ttl_ms);
idem_code idem_message_set_fingerprint(idem_message* message,
                                       const void* fingerprint, size_t size);
/* When the event happened (Message::event_time), in microseconds since the
 * epoch: a finite time advances the stream time of the message's (source,
 * partition) when it commits (idem_engine_stream_time; not beyond 15
 * minutes past the engine's clock, idem::kMaxEventTimeAhead).
 * IDEM_TIME_INFINITE_PAST: none (the default). IDEM_TIME_INFINITE_FUTURE is
 * refused when the message is processed (IDEM_INVALID_ARGUMENT). */
idem_code idem_message_set_event_time_us(idem_message* message,
                                         int64_t event_time_us);

/* Getters: views of the message's bytes, valid until the message is freed
 * or the same field is set again; *size gets the length (size may be NULL).
 * A NULL message gives NULL and size 0. */
const char* idem_message_id(const idem_message* message, size_t* size);
const char* idem_message_payload(const idem_message* message, size_t* size);
const char* idem_message_source(const idem_message* message, size_t* size);
int32_t idem_message_partition(const idem_message* message);
int64_t idem_message_offset(const idem_message* message);
/* The event time set (IDEM_TIME_INFINITE_PAST: none, or a NULL message). */
int64_t idem_message_event_time_us(const idem_message* message);

/* ---- Engine ---- */

/* Opens (or creates) the store at `path` (a NUL-terminated path) as
 * idem::Engine::Open does, with `options` (NULL: the defaults; the options
 * are copied, so they may be freed right after). On IDEM_OK, *engine is a
 * new handle the caller frees with idem_engine_free; on failure *engine is
 * NULL and the code is Open's: IDEM_INVALID_ARGUMENT for bad options or a
 * NULL path or out-pointer, IDEM_FAILED_PRECONDITION for a store open in
 * another engine or not an idem store, IDEM_NOT_FOUND, IDEM_DATA_LOSS, ... */
idem_code idem_engine_open(const char* path, const idem_options* options,
                           idem_engine** engine);

/* Closes the store: waits for the calls in progress on other threads, then
 * syncs the write-ahead log and releases the store, so another engine may
 * open it. The handle stays valid: every later call on it returns
 * IDEM_FAILED_PRECONDITION ("engine is closed"); closing again is IDEM_OK.
 * IDEM_FAILED_PRECONDITION, closing nothing, when called from inside one of
 * this engine's handlers. */
idem_code idem_engine_close(idem_engine* engine);

/* Closes the store if still open and frees the handle. NULL: no-op.
 * REQUIRES: no call on the engine is in progress, and none follows. */
void idem_engine_free(idem_engine* engine);

/* ---- Handlers and transactions (idem/txn.h) ---- */

/* What a handler returns: IDEM_HANDLER_COMMIT (0) commits the txn's writes
 * and emits; IDEM_HANDLER_PERMANENT remembers the message as permanently
 * failed (idem::PermanentError: its writes are dropped and every redelivery
 * gets the failure back without running the handler); any other value is a
 * transient failure: nothing commits and a redelivery runs the handler
 * again. The failure's code and message are those given to
 * idem_txn_set_error, or IDEM_UNKNOWN with "handler returned N". */
#define IDEM_HANDLER_COMMIT 0
#define IDEM_HANDLER_PERMANENT (-1)

/* The user code run once per new message ID. `user` is the pointer given to
 * the process call; `message` is the handle given to it (a view, valid
 * during the call); `txn` is valid only during this call, on this thread:
 * every txn call after the handler returned, or from another thread, fails
 * with IDEM_FAILED_PRECONDITION ("txn used outside its handler"). A handler
 * may run more than once for one delivery (see Handler in idem/txn.h): keep
 * side effects in txn writes and emits. */
typedef int (*idem_handler)(void* user, const idem_message* message,
                            idem_txn* txn);

/* The value of `key` as this message sees it (its own writes, earlier
 * messages of its batch, then the store). On IDEM_OK, *found is 1 and
 * *value / *value_size give a view valid until the next idem_txn_get on
 * this txn or the handler's return, or *found is 0 and *value NULL. A
 * storage error is returned as is: the handler should fail. */
idem_code idem_txn_get(idem_txn* txn, const void* key, size_t key_size,
                       const char** value, size_t* value_size, int* found);
/* Buffers a write or a deletion (of an absent key too), committed only if
 * the handler returns IDEM_HANDLER_COMMIT. Keys and values: any bytes. */
idem_code idem_txn_put(idem_txn* txn, const void* key, size_t key_size,
                       const void* value, size_t value_size);
idem_code idem_txn_delete(idem_txn* txn, const void* key, size_t key_size);
/* The bytes stored with the dedupe record and returned to this delivery and
 * its duplicates (idem_result_value). The last call wins. */
idem_code idem_txn_set_result(idem_txn* txn, const void* result, size_t size);
/* Buffers an outgoing message into the outbox (idem/outbox.h), committed
 * with the message. `destination`: 1 to IDEM_MAX_SOURCE_BYTES bytes without
 * a NUL; otherwise the message fails with IDEM_INVALID_ARGUMENT and nothing
 * of it commits (as idem::Txn::Emit). */
idem_code idem_txn_emit(idem_txn* txn, const void* destination,
                        size_t destination_size, const void* key,
                        size_t key_size, const void* value, size_t value_size);
/* One header of an emitted message: name and value, any bytes (read
 * during the call only). */
typedef struct idem_header {
  const void* name;
  size_t name_size;
  const void* value;
  size_t value_size;
} idem_header;

/* As idem_txn_emit, with a destination partition (>= 0; -1: the relay's
 * partitioner chooses by key), a tombstone (non-zero: publish a null value;
 * `value` must then be empty) and `header_count` headers (`headers` may be
 * NULL when 0), stored with the entry (idem::Txn::EmitWithOptions). A
 * partition below -1 or a tombstone with a value fails the message with
 * IDEM_INVALID_ARGUMENT and nothing of it commits; a NULL header name or
 * value with a non-zero size is IDEM_INVALID_ARGUMENT for the call. */
idem_code idem_txn_emit_with_options(idem_txn* txn, const void* destination,
                                     size_t destination_size, const void* key,
                                     size_t key_size, const void* value,
                                     size_t value_size, int32_t partition,
                                     int tombstone, const idem_header* headers,
                                     size_t header_count);
/* The failure reported when the handler then returns non-zero (the last
 * call wins): `code` must not be IDEM_OK; `message` is NUL-terminated, may
 * be NULL (empty) and is copied. */
idem_code idem_txn_set_error(idem_txn* txn, idem_code code,
                             const char* message);

/* ---- State beyond single keys (docs/state.md) ---- */

/* Called for each key a scan visits, in scan order: `key` and `value` are
 * views valid during the call only. Return 0 to go on, non-zero to stop the
 * scan there. It may call the txn's other calls (not on another thread). */
typedef int (*idem_scan_visitor)(void* user, const char* key, size_t key_size,
                                 const char* value, size_t value_size);

/* Visits the keys in [begin, end) in byte order (reverse order when
 * `reverse` is non-zero; `end_size` 0: no upper bound), at most `limit` of
 * them (0: no limit), with their values as this message sees them (as
 * idem_txn_get), until `visit` returns non-zero (idem::Txn::Scan: the part
 * of the range read is validated at commit, so a scan is serializable).
 * IDEM_INVALID_ARGUMENT if `end` is non-empty and below `begin`, or `visit`
 * is NULL; a storage error as idem_txn_get returns it. */
idem_code idem_txn_scan(idem_txn* txn, const void* begin, size_t begin_size,
                        const void* end, size_t end_size, int reverse,
                        size_t limit, idem_scan_visitor visit, void* user);
/* As idem_txn_scan over the keys that start with `prefix` (all keys when
 * `prefix_size` is 0). */
idem_code idem_txn_scan_prefix(idem_txn* txn, const void* prefix,
                               size_t prefix_size, int reverse, size_t limit,
                               idem_scan_visitor visit, void* user);

/* The built-in merge operators (idem::MergeOp, idem/merge.h). The int64
 * ones take an 8-byte little-endian two's-complement operand and keep an
 * 8-byte value of the same encoding; IDEM_MERGE_APPEND appends any bytes. */
typedef enum idem_merge_op {
  IDEM_MERGE_ADD_INT64 = 1,
  IDEM_MERGE_MAX_INT64 = 2,
  IDEM_MERGE_MIN_INT64 = 3,
  IDEM_MERGE_APPEND = 4
} idem_merge_op;

/* Buffers a merge of `operand` into `key` (idem::Txn::Merge): a blind
 * write, so merges of one key by concurrent handlers never conflict. An
 * unknown `op` or an operand of the wrong size is IDEM_INVALID_ARGUMENT,
 * and the message then fails with it. */
idem_code idem_txn_merge(idem_txn* txn, const void* key, size_t key_size,
                         idem_merge_op op, const void* operand,
                         size_t operand_size);

/* Buffers a deletion of every key in [begin, end) (idem::Txn::DeleteRange).
 * IDEM_INVALID_ARGUMENT if `end_size` is 0 or `end` is below `begin` (the
 * message then fails with it); begin == end deletes nothing. */
idem_code idem_txn_delete_range(idem_txn* txn, const void* begin,
                                size_t begin_size, const void* end,
                                size_t end_size);

/* ---- Time, timers and state TTL (docs/state.md, "Time and timers") ---- */

/* As idem_txn_put, with a value that expires `ttl_ms` milliseconds after
 * the write's commit (Txn::Put with PutOptions::ttl): from then on every
 * read sees the key as absent, and compaction drops it. A `ttl_ms` of 0 or
 * less is IDEM_INVALID_ARGUMENT, and the message then fails with it, even
 * if the handler goes on. The first write with a TTL marks a store of an
 * older format as format 6, which older builds refuse to open. */
idem_code idem_txn_put_with_ttl(idem_txn* txn, const void* key, size_t key_size,
                                const void* value, size_t value_size,
                                int64_t ttl_ms);

/* The clock a timer follows (idem::TimeDomain, same numbers). */
typedef enum idem_time_domain {
  /* The partition's stream time: due once its committed messages carry an
   * event time at or past the timer's. */
  IDEM_TIME_EVENT = 0,
  /* The engine's clock: due once it reaches the timer's time (also on the
   * first idem_engine_fire_timers after a restart). */
  IDEM_TIME_PROCESSING = 1
} idem_time_domain;

/* On IDEM_OK, *stream_time_us is the stream time of this message's (source,
 * partition) as the handler sees it (Txn::stream_time: the committed one,
 * raised by the earlier messages of its batch and its own event time; in a
 * timer's handler, that of the timer's partition), or
 * IDEM_TIME_INFINITE_PAST if no message carried an event time.
 * IDEM_INVALID_ARGUMENT for a NULL out-pointer. */
idem_code idem_txn_stream_time(idem_txn* txn, int64_t* stream_time_us);

/* Buffers the timer `timer_key` (any bytes) of this message's (source,
 * partition), committed with the message: once `fire_at_us` is reached in
 * `domain`, idem_engine_fire_timers runs its handler with `payload` (any
 * bytes; both are copied). One timer per key per partition: setting a key
 * again moves it (Txn::SetTimer). Codes:
 *   - IDEM_INVALID_ARGUMENT for an infinite `fire_at_us` or a `domain` that
 *     is no idem_time_domain: the message then fails with it, even if the
 *     handler goes on;
 *   - IDEM_OUT_OF_RANGE, setting nothing, for an IDEM_TIME_EVENT timer at
 *     or below idem_txn_stream_time (that time has passed); the message is
 *     unaffected;
 *   - IDEM_FAILED_PRECONDITION for a message without a source. */
idem_code idem_txn_set_timer(idem_txn* txn, const void* timer_key,
                             size_t timer_key_size, idem_time_domain domain,
                             int64_t fire_at_us, const void* payload,
                             size_t payload_size);
/* Buffers the deletion of the timer `timer_key` of this message's
 * partition, if there is one (Txn::CancelTimer). IDEM_FAILED_PRECONDITION
 * for a message without a source. */
idem_code idem_txn_cancel_timer(idem_txn* txn, const void* timer_key,
                                size_t timer_key_size);

/* A timer (idem::TimerFire): as it fires, or as idem_engine_next_timer
 * finds it. Getters: views valid until the handle is freed (in a timer
 * handler: until it returns); *size gets the length (size may be NULL). A
 * NULL handle gives NULL and size 0, partition 0, IDEM_TIME_EVENT and
 * IDEM_TIME_INFINITE_PAST. */
void idem_timer_free(idem_timer* timer);
const char* idem_timer_source(const idem_timer* timer, size_t* size);
int32_t idem_timer_partition(const idem_timer* timer);
idem_time_domain idem_timer_domain(const idem_timer* timer);
const char* idem_timer_key(const idem_timer* timer, size_t* size);
/* When the timer was due, in its domain's time. */
int64_t idem_timer_fire_at_us(const idem_timer* timer);
const char* idem_timer_payload(const idem_timer* timer, size_t* size);

/* The user code run once per timer that fires. `timer` is a view valid
 * during the call only; `txn` is a txn of the timer's partition, valid as a
 * message handler's (idem_handler): its writes, emits and timers commit in
 * the same write as the timer's deletion. Returns as an idem_handler does:
 * IDEM_HANDLER_COMMIT (0) commits; IDEM_HANDLER_PERMANENT deletes the timer
 * without its effects (dead-lettered, idem_stats.timers_dead_lettered); any
 * other value is a transient failure that keeps the timer, so it fires
 * again on a later call (the code and message are idem_txn_set_error's, or
 * IDEM_UNKNOWN "handler returned N"). It may run more than once for one
 * fire: keep side effects in the txn. */
typedef int (*idem_timer_handler)(void* user, const idem_timer* timer,
                                  idem_txn* txn);

/* Fires the due timers of (source, partition) in `domain`, earliest first,
 * at most `max` (Engine::FireTimers): those with a time at or below
 * `up_to_us` (IDEM_TIME_INFINITE_FUTURE: no bound) and, for
 * IDEM_TIME_EVENT, the partition's stream time, for IDEM_TIME_PROCESSING,
 * the engine's clock. On IDEM_OK, *fired is how many fired (permanent
 * failures included). A handler's transient failure returns its code: the
 * fires before it committed, its timer stays and the rest wait for a later
 * call (*fired is then 0). IDEM_INVALID_ARGUMENT for a NULL engine, handler
 * or `fired`, an empty or too long source, a negative partition, a `domain`
 * that is no idem_time_domain or `max` 0; IDEM_FAILED_PRECONDITION on a
 * closed or read-only engine or from inside one of its handlers; storage
 * errors as idem_engine_process. Durable on return under
 * IDEM_DURABILITY_SYNC; under BUFFERED with the next sync. */
idem_code idem_engine_fire_timers(idem_engine* engine, const void* source,
                                  size_t source_size, int32_t partition,
                                  idem_time_domain domain, int64_t up_to_us,
                                  size_t max, idem_timer_handler handler,
                                  void* user, size_t* fired);

/* The earliest committed timer of (source, partition) in `domain`, due or
 * not (Engine::NextTimer). On IDEM_OK, *timer is a new handle the caller
 * frees with idem_timer_free, or NULL if there is none. Errors as
 * idem_engine_stream_time, and IDEM_INVALID_ARGUMENT for a `domain` that is
 * no idem_time_domain or a NULL `timer`. */
idem_code idem_engine_next_timer(idem_engine* engine, const void* source,
                                 size_t source_size, int32_t partition,
                                 idem_time_domain domain, idem_timer** timer);

/* On IDEM_OK, *stream_time_us is the committed stream time of (source,
 * partition) (Engine::StreamTime: the largest committed event time of its
 * messages, never decreasing), or IDEM_TIME_INFINITE_PAST if none carried
 * one. IDEM_INVALID_ARGUMENT for a NULL engine or out-pointer, an empty or
 * too long source or a negative partition; IDEM_FAILED_PRECONDITION on a
 * closed engine. */
idem_code idem_engine_stream_time(idem_engine* engine, const void* source,
                                  size_t source_size, int32_t partition,
                                  int64_t* stream_time_us);

/* ---- Processing ---- */

typedef enum idem_outcome {
  IDEM_OUTCOME_PROCESSED = 0, /* the handler ran; its writes committed */
  IDEM_OUTCOME_DUPLICATE = 1, /* a live record existed; nothing ran */
  IDEM_OUTCOME_FAILED = 2,    /* the handler failed (see idem_result_*) */
  IDEM_OUTCOME_CONFLICT = 3   /* detect_conflicts: another fingerprint */
} idem_outcome;

/* Processes one delivery as idem::Engine::Process: runs `handler` unless
 * the ID is a duplicate, and commits its writes, the dedupe record and the
 * source offset in one write. A failed handler is not an error of the call:
 * it returns IDEM_OK with an IDEM_OUTCOME_FAILED result. On IDEM_OK,
 * *result is a new handle the caller frees with idem_result_free; on
 * failure *result is NULL and nothing was committed (but IDEM_UNKNOWN: the
 * commit's sync failed and its outcome is unknown, see Engine::Process).
 * IDEM_INVALID_ARGUMENT for a NULL engine, message, handler or result
 * pointer, or a bad message (an empty ID or one over IDEM_MAX_ID_BYTES, a
 * source over IDEM_MAX_SOURCE_BYTES, a negative partition, an offset of
 * INT64_MAX, a negative ttl); IDEM_FAILED_PRECONDITION on a closed engine,
 * or from inside one of this engine's handlers; storage errors as
 * Engine::Process. */
idem_code idem_engine_process(idem_engine* engine, const idem_message* message,
                              idem_handler handler, void* user,
                              idem_result** result);

/* Processes `count` messages in order as one commit (idem::Engine::
 * ProcessBatch). `messages` is an array of `count` handles (count 0: an
 * empty list). On IDEM_OK, *results is a new list of `count` results in
 * the same order, which the caller frees with idem_result_list_free. Errors
 * as idem_engine_process; a NULL or bad message rejects the whole batch
 * before any handler runs. */
idem_code idem_engine_process_batch(idem_engine* engine,
                                    const idem_message* const* messages,
                                    size_t count, idem_handler handler,
                                    void* user, idem_result_list** results);

void idem_result_free(idem_result* result);
void idem_result_list_free(idem_result_list* results);
size_t idem_result_list_size(const idem_result_list* results);
/* View of the list's i-th result, valid until the list is freed; NULL for
 * i >= size. Do not pass it to idem_result_free. */
const idem_result* idem_result_list_get(const idem_result_list* results,
                                        size_t i);

idem_outcome idem_result_outcome(const idem_result* result);
/* IDEM_OUTCOME_PROCESSED: the bytes the handler set (idem_txn_set_result);
 * DUPLICATE and CONFLICT: those stored by the first delivery. View, valid
 * until the result (or its list) is freed. */
const char* idem_result_value(const idem_result* result, size_t* size);
/* IDEM_OUTCOME_FAILED: the failure's code and message (NUL-terminated view,
 * valid until the result is freed); IDEM_OK and "" otherwise. */
idem_code idem_result_error_code(const idem_result* result);
const char* idem_result_error_message(const idem_result* result);
/* Whether a FAILED outcome is permanent (remembered); 0 otherwise. */
int idem_result_permanent(const idem_result* result);
/* The commit this outcome depends on (pass it to idem_engine_wait_durable
 * under IDEM_DURABILITY_BUFFERED); 0 for a transient failure. */
uint64_t idem_result_sequence(const idem_result* result);
/* When the ID was first processed, in microseconds since the Unix epoch;
 * INT64_MIN when unknown (see idem::Result::first_processed_at). */
int64_t idem_result_first_processed_at_us(const idem_result* result);

/* ---- Reading and maintenance ---- */

/* The committed value of state key `key`. On IDEM_OK with *found 1, *value
 * is a new buffer of *value_size bytes (plus a NUL after them, not counted)
 * that the caller frees with idem_free; with *found 0, *value is NULL. */
idem_code idem_engine_get_state(idem_engine* engine, const void* key,
                                size_t key_size, char** value,
                                size_t* value_size, int* found);

/* Visits the committed state keys in [begin, end) as idem_txn_scan does,
 * from one snapshot of the store (idem::Engine::ScanState): what no handler
 * can change meanwhile, and nothing a handler has not committed. Errors as
 * idem_txn_scan, and IDEM_UNAVAILABLE while the store is closed. */
idem_code idem_engine_scan_state(idem_engine* engine, const void* begin,
                                 size_t begin_size, const void* end,
                                 size_t end_size, int reverse, size_t limit,
                                 idem_scan_visitor visit, void* user);

/* Whether a live dedupe record for `id` exists (*seen 1 or 0). Errors as
 * idem::Engine::Seen (IDEM_INVALID_ARGUMENT for a bad ID,
 * IDEM_FAILED_PRECONDITION in a partition-scoped store). */
idem_code idem_engine_seen(idem_engine* engine, const void* id, size_t size,
                           int* seen);

/* Removes the dedupe record of `id`, so its next delivery runs the handler
 * again (state writes stay). An absent ID is not an error. Errors as
 * idem::Engine::Forget(id). */
idem_code idem_engine_forget(idem_engine* engine, const void* id, size_t size);
/* As idem_engine_forget, for the record of `id` delivered on (source,
 * partition) in a partition-scoped store (Engine::Forget(id, source,
 * partition)). */
idem_code idem_engine_forget_in_partition(idem_engine* engine, const void* id,
                                          size_t size, const void* source,
                                          size_t source_size,
                                          int32_t partition);

/* The highest committed offset of (source, partition): *found 1 and
 * *offset, or *found 0 when none was recorded. IDEM_INVALID_ARGUMENT for an
 * empty or too long source or a negative partition. */
idem_code idem_engine_committed_offset(idem_engine* engine, const void* source,
                                       size_t source_size, int32_t partition,
                                       int64_t* offset, int* found);

/* Returns once every commit up to `sequence` is durable (syncs if needed).
 * IDEM_INVALID_ARGUMENT for a sequence the engine never issued. */
idem_code idem_engine_wait_durable(idem_engine* engine, uint64_t sequence);

/* Counters and RocksDB figures (idem/stats.h). Set struct_size to
 * sizeof(idem_stats) before the call: the call fills the fields that fit in
 * struct_size, so a program built against an older, shorter struct keeps
 * working. New fields are only ever appended. */
typedef struct idem_stats {
  size_t struct_size;
  uint64_t processed;
  uint64_t duplicates;
  uint64_t failed;
  uint64_t conflicts;
  uint64_t handler_reruns;
  uint64_t late_duplicates;
  uint64_t outbox_pending;
  uint64_t outbox_emitted;
  uint64_t outbox_acknowledged;
  uint64_t expired_dropped;
  uint64_t user_bytes;
  uint64_t wal_bytes;
  uint64_t flush_bytes;
  uint64_t compaction_bytes;
  double write_amplification;
  uint64_t live_sst_bytes;
  uint64_t estimated_live_records;
  uint64_t memtable_bytes;
  uint64_t block_cache_bytes;
  uint64_t commits;
  double commit_seconds;
  /* IDEM_C_API_MINOR 1: timers fired since open (idem_engine_fire_timers),
   * those of them dead-lettered (a permanent failure), and timer handler
   * calls that failed transiently (the timer stayed). */
  uint64_t timers_fired;
  uint64_t timers_dead_lettered;
  uint64_t timer_failures;
} idem_stats;

/* Fills *stats. IDEM_INVALID_ARGUMENT for NULL, or a struct_size smaller
 * than the struct's first two fields. */
idem_code idem_engine_stats(idem_engine* engine, idem_stats* stats);

/* ---- Outbox (idem/outbox.h) ---- */

/* Up to `max_entries` unacknowledged, durable outbox entries, oldest first
 * (idem::Engine::ReadOutbox; `after` > 0 reads only positions above it,
 * Engine::ReadOutboxAfter). On IDEM_OK, *batch is a new handle the caller
 * frees with idem_outbox_batch_free. IDEM_INVALID_ARGUMENT for
 * max_entries 0. */
idem_code idem_engine_read_outbox(idem_engine* engine, uint64_t after,
                                  size_t max_entries,
                                  idem_outbox_batch** batch);
void idem_outbox_batch_free(idem_outbox_batch* batch);
size_t idem_outbox_batch_size(const idem_outbox_batch* batch);
/* Entry i's fields; views valid until the batch is freed. Out of range or
 * NULL: 0, NULL. */
uint64_t idem_outbox_position(const idem_outbox_batch* batch, size_t i);
const char* idem_outbox_message_id(const idem_outbox_batch* batch, size_t i,
                                   size_t* size);
const char* idem_outbox_destination(const idem_outbox_batch* batch, size_t i,
                                    size_t* size);
const char* idem_outbox_key(const idem_outbox_batch* batch, size_t i,
                            size_t* size);
const char* idem_outbox_value(const idem_outbox_batch* batch, size_t i,
                              size_t* size);
int32_t idem_outbox_partition(const idem_outbox_batch* batch, size_t i);
/* Whether entry i is a tombstone (a null value); 0 otherwise. */
int idem_outbox_tombstone(const idem_outbox_batch* batch, size_t i);
/* Entry i's headers, in order: how many, and header h's name and value
 * (views valid until the batch is freed; NULL and size 0 out of range). */
size_t idem_outbox_header_count(const idem_outbox_batch* batch, size_t i);
const char* idem_outbox_header_name(const idem_outbox_batch* batch, size_t i,
                                    size_t h, size_t* size);
const char* idem_outbox_header_value(const idem_outbox_batch* batch, size_t i,
                                     size_t h, size_t* size);

/* Removes every outbox entry with position <= `position` (Engine::
 * AckOutbox). IDEM_INVALID_ARGUMENT for a position never issued. */
idem_code idem_engine_ack_outbox(idem_engine* engine, uint64_t position);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* IDEM_C_H_ */
