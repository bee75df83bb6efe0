// The PostgreSQL peer (bench/peers/postgres_peer.h).

#include "bench/peers/postgres_peer.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace idem::peers {
namespace {

using PgResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

class PgConn {
 public:
  static absl::StatusOr<PgConn> Connect(const std::string& conninfo) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      std::string error = conn != nullptr ? PQerrorMessage(conn) : "no memory";
      if (conn != nullptr) PQfinish(conn);
      while (!error.empty() && error.back() == '\n') error.pop_back();
      return absl::UnavailableError(absl::StrFormat(
          "cannot reach PostgreSQL at '%s': %s", conninfo, error));
    }
    // Drop NOTICEs (e.g. DROP TABLE IF EXISTS on a missing table).
    PQsetNoticeProcessor(
        conn, [](void*, const char*) {}, nullptr);
    return PgConn(conn);
  }
  PgConn(PgConn&& other) noexcept : conn_(other.conn_) {
    other.conn_ = nullptr;
  }
  PgConn& operator=(PgConn&&) = delete;
  ~PgConn() {
    if (conn_ != nullptr) PQfinish(conn_);
  }
  PGconn* get() const { return conn_; }

  // Runs `sql` (no parameters); returns the first value of the first row, if
  // any.
  absl::StatusOr<std::string> Exec(const std::string& sql) {
    PgResultPtr r(PQexec(conn_, sql.c_str()), &PQclear);
    const ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return absl::InternalError(absl::StrFormat(
          "postgres: %s: %s", sql, PQresultErrorMessage(r.get())));
    }
    if (st == PGRES_TUPLES_OK && PQntuples(r.get()) > 0 &&
        PQnfields(r.get()) > 0) {
      return std::string(PQgetvalue(r.get(), 0, 0));
    }
    return std::string();
  }

 private:
  explicit PgConn(PGconn* conn) : conn_(conn) {}
  PGconn* conn_;
};

// One statement per message: the inbox insert and, only if it inserted, the
// balance upsert. One round trip; atomic as one statement.
constexpr char kPgDedupeSql[] =
    "WITH inserted AS ("
    " INSERT INTO inbox (message_id) VALUES ($1)"
    " ON CONFLICT (message_id) DO NOTHING RETURNING 1) "
    "INSERT INTO state (account, balance) SELECT $2, $3::bigint FROM inserted "
    "ON CONFLICT (account) DO UPDATE SET balance = state.balance + "
    "EXCLUDED.balance";

class PgClient : public Client {
 public:
  PgClient(PgConn conn, bool pipelined)
      : conn_(std::move(conn)), pipelined_(pipelined) {}

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    if (!pipelined_) {
      uint64_t news = 0;
      for (const StreamMessage* m : batch) {
        const std::string amount = std::to_string(m->payment.amount);
        const char* values[3] = {m->id.c_str(), m->account.c_str(),
                                 amount.c_str()};
        PgResultPtr r(PQexecPrepared(conn_.get(), "dedupe", 3, values, nullptr,
                                     nullptr, 0),
                      &PQclear);
        if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
          return absl::InternalError(
              absl::StrFormat("postgres: %s", PQresultErrorMessage(r.get())));
        }
        if (std::strcmp(PQcmdTuples(r.get()), "1") == 0) ++news;
      }
      return news;
    }
    // One transaction per poll, sent as one pipeline: BEGIN, the statements,
    // COMMIT, sync. One network round trip and one commit per poll.
    PGconn* c = conn_.get();
    bool sent = PQsendQueryParams(c, "BEGIN", 0, nullptr, nullptr, nullptr,
                                  nullptr, 0) == 1;
    std::vector<std::string> amounts;
    amounts.reserve(batch.size());
    for (const StreamMessage* m : batch) {
      amounts.push_back(std::to_string(m->payment.amount));
      const char* values[3] = {m->id.c_str(), m->account.c_str(),
                               amounts.back().c_str()};
      sent = sent && PQsendQueryPrepared(c, "dedupe", 3, values, nullptr,
                                         nullptr, 0) == 1;
    }
    sent = sent && PQsendQueryParams(c, "COMMIT", 0, nullptr, nullptr, nullptr,
                                     nullptr, 0) == 1;
    sent = sent && PQpipelineSync(c) == 1;
    if (!sent) {
      return absl::InternalError(absl::StrFormat(
          "postgres: sending a pipeline: %s", PQerrorMessage(c)));
    }
    uint64_t news = 0;
    std::string error;
    const size_t statements = batch.size() + 2;
    for (size_t i = 0; i < statements; ++i) {
      PgResultPtr r(PQgetResult(c), &PQclear);
      if (r == nullptr) {
        if (error.empty()) error = "pipeline ended early";
        break;
      }
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
        if (error.empty()) error = PQresultErrorMessage(r.get());
      } else if (i > 0 && i + 1 < statements &&
                 std::strcmp(PQcmdTuples(r.get()), "1") == 0) {
        ++news;
      }
      PgResultPtr end(PQgetResult(c), &PQclear);  // NULL after each result
    }
    // The sync point.
    for (int i = 0; i < 4; ++i) {
      PgResultPtr r(PQgetResult(c), &PQclear);
      if (r != nullptr && PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    }
    if (!error.empty()) {
      return absl::InternalError(absl::StrFormat("postgres: %s", error));
    }
    return news;
  }

 private:
  PgConn conn_;
  const bool pipelined_;
};

class PgTarget : public Target {
 public:
  PgTarget(std::string conninfo, bool synchronous_commit, bool pipelined)
      : conninfo_(std::move(conninfo)),
        synchronous_commit_(synchronous_commit),
        pipelined_(pipelined) {}

  absl::Status Setup() override {
    absl::StatusOr<PgConn> admin = PgConn::Connect(conninfo_);
    if (!admin.ok()) return admin.status();
    for (const char* sql : {
             "DROP TABLE IF EXISTS inbox, state",
             "CREATE TABLE inbox (message_id text PRIMARY KEY, processed_at "
             "timestamptz NOT NULL DEFAULT now())",
             "CREATE TABLE state (account text PRIMARY KEY, balance bigint NOT "
             "NULL)",
             // Every run starts right after a checkpoint, so each pays the
             // same full-page images.
             "CHECKPOINT",
         }) {
      if (absl::StatusOr<std::string> r = admin->Exec(sql); !r.ok()) {
        return r.status();
      }
    }
    absl::StatusOr<std::string> lsn =
        admin->Exec("SELECT pg_current_wal_lsn()");
    if (!lsn.ok()) return lsn.status();
    start_lsn_ = *lsn;
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    absl::StatusOr<PgConn> conn = PgConn::Connect(conninfo_);
    if (!conn.ok()) return conn.status();
    absl::StatusOr<std::string> set =
        conn->Exec(synchronous_commit_ ? "SET synchronous_commit = on"
                                       : "SET synchronous_commit = off");
    if (!set.ok()) return set.status();
    PgResultPtr prepared(
        PQprepare(conn->get(), "dedupe", kPgDedupeSql, 3, nullptr), &PQclear);
    if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      return absl::InternalError(absl::StrFormat(
          "postgres: prepare: %s", PQresultErrorMessage(prepared.get())));
    }
    if (pipelined_ && PQenterPipelineMode(conn->get()) != 1) {
      return absl::InternalError("postgres: cannot enter pipeline mode");
    }
    return std::unique_ptr<Client>(
        std::make_unique<PgClient>(std::move(*conn), pipelined_));
  }

  absl::StatusOr<FinalState> Finish(int /*accounts*/) override {
    absl::StatusOr<PgConn> admin = PgConn::Connect(conninfo_);
    if (!admin.ok()) return admin.status();
    FinalState final;
    absl::StatusOr<std::string> count =
        admin->Exec("SELECT count(*) FROM inbox");
    absl::StatusOr<std::string> sum =
        admin->Exec("SELECT coalesce(sum(balance), 0) FROM state");
    absl::StatusOr<std::string> wal = admin->Exec(absl::StrFormat(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')::bigint",
        start_lsn_));
    absl::StatusOr<std::string> size = admin->Exec(
        "SELECT pg_total_relation_size('inbox') + "
        "pg_total_relation_size('state')");
    for (const auto* r : {&count, &sum, &wal, &size}) {
      if (!r->ok()) return r->status();
    }
    final.stored_ids = std::strtoull(count->c_str(), nullptr, 10);
    final.balance_sum = std::strtoll(sum->c_str(), nullptr, 10);
    final.written_bytes = std::strtoull(wal->c_str(), nullptr, 10);
    final.disk_bytes = std::strtoull(size->c_str(), nullptr, 10);
    final.note = "WA: WAL bytes only; disk: tables+indexes, WAL excluded";
    if (absl::StatusOr<std::string> r =
            admin->Exec("DROP TABLE IF EXISTS inbox, state");
        !r.ok()) {
      return r.status();
    }
    return final;
  }

 private:
  const std::string conninfo_;
  const bool synchronous_commit_;
  const bool pipelined_;
  std::string start_lsn_;
};

}  // namespace

std::unique_ptr<Target> NewPostgresTarget(std::string conninfo,
                                          bool synchronous_commit,
                                          bool pipelined) {
  return std::make_unique<PgTarget>(std::move(conninfo), synchronous_commit,
                                    pipelined);
}

absl::Status PostgresReachable(const std::string& conninfo) {
  return PgConn::Connect(conninfo).status();
}

}  // namespace idem::peers
