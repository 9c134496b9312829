#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collect/case.h"
#include "collect/disposition.h"
#include "collect/params.h"

namespace servecast::collect {

using Json = nlohmann::ordered_json;

// What a journal is bound to: resuming under a different backend, library stack,
// device architecture or plan is refused.
struct JournalHeader {
  std::string schema = "servecast-journal-1";
  std::string backend;
  std::string version;  // library stack
  std::string device;
  std::string arch;
  int sm = 0;
  std::string system;
  std::string plan_hash;
  int shard_index = 0, shard_count = 1;
  std::string servecast_commit;
  std::string created_at;

  Json ToJson() const;
  static JournalHeader FromJson(const Json& j, const std::string& where);
  // Empty when `other` may resume this journal; else what differs, field by field.
  std::string Mismatch(const JournalHeader& other) const;
};

// One finished case: its outcome and, when passed, the rows it produced. Rows and
// completion are one record, so a case is either fully in the journal or not at all.
struct JournalRecord {
  std::string id;
  std::string op;
  Params params;
  Disposition status = Disposition::kFailed;
  FailureClass failure_class = FailureClass::kNone;
  std::string error_type;
  std::string message;
  std::vector<Params> rows;
  int worker = -1;
  double elapsed_s = 0;
  std::string at;  // UTC time the parent recorded it

  Json ToJson() const;
  static JournalRecord FromJson(const Json& j, const std::string& where);
};

// One collect call that wrote to the journal: the header's creation is the first;
// each resume appends a "session" line. Records belong to the newest session that
// started at or before their time (Journal::SessionOf).
struct JournalSession {
  std::string servecast_commit;
  std::string started_at;  // UtcNow format
};

struct JournalContents {
  JournalHeader header;
  std::vector<JournalSession> sessions;  // the header's first, then one per resume, in file order
  std::vector<JournalRecord> records;    // in file order
  bool torn_tail = false;               // the last line was cut short by a crash
  std::uint64_t valid_bytes = 0;        // length of the file up to the last whole record
};

// Reads a journal. A last line without its newline is a torn write (crash during
// append) and is dropped; any other malformed line is a DataError naming the file,
// the line and what was expected.
JournalContents ReadJournal(const std::string& path);

// Appends records and makes them durable (fdatasync) in batches.
class JournalWriter {
 public:
  // Creates a new journal with `header` (refuses to overwrite an existing file
  // unless `truncate_existing`), or, with `resume_bytes` >= 0, opens the existing
  // one and cuts it to that length (dropping a torn tail) to append.
  static JournalWriter Create(const std::string& path, const JournalHeader& header);
  static JournalWriter Append(const std::string& path, std::uint64_t resume_bytes);

  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&& other) noexcept;
  JournalWriter(const JournalWriter&) = delete;
  ~JournalWriter();

  // Buffers a record; Commit() writes every buffered record and syncs once.
  void Add(const JournalRecord& record);
  // Buffers a session line (a resume by `session.servecast_commit`).
  void AddSession(const JournalSession& session);
  void Commit();

 private:
  JournalWriter() = default;
  int fd_ = -1;
  std::string path_;
  std::string pending_;
};

// Sessions named by the "<time> info: servecast <version> (<commit>) collect:" lines
// of a run's collector.log, in order: for journals written before session lines
// existed. Empty when the file is absent.
std::vector<JournalSession> SessionsFromLog(const std::string& collector_log);
// The session a record stamped `at` belongs to: the newest one started at or
// before it (the first when `at` precedes all or does not parse).
const JournalSession& SessionOf(const std::vector<JournalSession>& sessions, const std::string& at);

// The record of one finished case, stamped now.
JournalRecord MakeRecord(const Case& c, Disposition status, FailureClass cls, std::string error_type,
                         std::string message, std::vector<Params> rows, int worker, double elapsed_s);

Json ParamsToJson(const Params& p);
Params ParamsFromJson(const Json& j, const std::string& where);
std::string UtcNow();  // ISO 8601, seconds
// Seconds since the epoch -> UtcNow's format.
std::string FormatUtcSeconds(std::int64_t seconds);
// Seconds since the epoch of a time in UtcNow's format, YYYY-MM-DDTHH:MM:SSZ
// exactly (a real calendar date, hours 00-23, minutes and seconds 00-59);
// nothing for anything else.
std::optional<std::int64_t> ParseUtcSeconds(std::string_view text);

}  // namespace servecast::collect
