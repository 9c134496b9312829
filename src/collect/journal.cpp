#include "collect/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>

#include "core/error.h"
#include "core/fs.h"

namespace servecast::collect {

std::string UtcNow() {
  return FormatUtcSeconds(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
}

std::string FormatUtcSeconds(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::int64_t> ParseUtcSeconds(std::string_view text) {
  const std::string str(text);
  std::tm tm{};
  const char* end = strptime(str.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end) return std::nullopt;
  const std::int64_t seconds = timegm(&tm);
  // timegm normalizes (Feb 30 -> Mar 2, 24:00 -> the next day) and strptime takes
  // unpadded fields: only text that formats back to itself is a real time in layout.
  if (FormatUtcSeconds(seconds) != str) return std::nullopt;
  return seconds;
}

Json ParamsToJson(const Params& p) {
  Json j = Json::object();
  for (const auto& [k, v] : p.items()) {
    switch (TypeOf(v)) {
      case ValueType::kInt64: j[k] = std::get<std::int64_t>(v); break;
      case ValueType::kDouble: {
        double d = std::get<double>(v);
        if (!std::isfinite(d)) throw Error("value of '" + k + "' is not finite (" + FormatDouble(d) + ")");
        j[k] = d;
        break;
      }
      case ValueType::kString: j[k] = std::get<std::string>(v); break;
    }
  }
  return j;
}

Params ParamsFromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) throw DataError(where + ": expected an object of parameters");
  Params p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const Json& v = it.value();
    if (v.is_number_integer()) p.Set(it.key(), v.get<std::int64_t>());
    else if (v.is_number_float()) p.Set(it.key(), v.get<double>());
    else if (v.is_string()) p.Set(it.key(), v.get<std::string>());
    else throw DataError(where + ": value of '" + it.key() + "' is " + v.type_name() + "; expected a number or a string");
  }
  return p;
}

Json JournalHeader::ToJson() const {
  return Json{{"type", "header"},       {"schema", schema},
              {"backend", backend},     {"version", version},
              {"device", device},       {"arch", arch},
              {"sm", sm},               {"system", system},
              {"plan_hash", plan_hash}, {"shard", std::to_string(shard_index) + "/" + std::to_string(shard_count)},
              {"servecast_commit", servecast_commit}, {"created_at", created_at}};
}

JournalHeader JournalHeader::FromJson(const Json& j, const std::string& where) {
  JournalHeader h;
  try {
    if (j.at("type") != "header") throw DataError(where + ": first record is not a header");
    h.schema = j.at("schema").get<std::string>();
    if (h.schema != "servecast-journal-1")
      throw DataError(where + ": journal schema '" + h.schema + "'; expected servecast-journal-1");
    h.backend = j.at("backend").get<std::string>();
    h.version = j.at("version").get<std::string>();
    h.device = j.at("device").get<std::string>();
    h.arch = j.at("arch").get<std::string>();
    h.sm = j.at("sm").get<int>();
    h.system = j.at("system").get<std::string>();
    h.plan_hash = j.at("plan_hash").get<std::string>();
    std::string shard = j.at("shard").get<std::string>();
    auto slash = shard.find('/');
    if (slash == std::string::npos) throw DataError(where + ": shard '" + shard + "'; expected I/N");
    try {
      h.shard_index = std::stoi(shard.substr(0, slash));
      h.shard_count = std::stoi(shard.substr(slash + 1));
    } catch (const std::exception&) {
      throw DataError(where + ": shard '" + shard + "'; expected I/N with integers I and N");
    }
    h.servecast_commit = j.value("servecast_commit", "");
    h.created_at = j.value("created_at", "");
  } catch (const Json::exception& e) {
    throw DataError(where + ": malformed journal header (" + e.what() +
                    "); expected backend, version, device, arch, sm, system, plan_hash, shard");
  }
  return h;
}

std::string JournalHeader::Mismatch(const JournalHeader& o) const {
  std::string out;
  auto cmp = [&](const char* name, const std::string& a, const std::string& b) {
    if (a != b) out += std::string(out.empty() ? "" : "; ") + name + ": journal has '" + a + "', this run has '" + b + "'";
  };
  cmp("backend", backend, o.backend);
  cmp("library stack", version, o.version);
  cmp("device", device, o.device);
  cmp("arch", arch, o.arch);
  cmp("sm", std::to_string(sm), std::to_string(o.sm));
  cmp("system", system, o.system);
  cmp("plan", plan_hash, o.plan_hash);
  cmp("shard", std::to_string(shard_index) + "/" + std::to_string(shard_count),
      std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count));
  return out;
}

Json JournalRecord::ToJson() const {
  Json rows_json = Json::array();
  for (const auto& r : rows) rows_json.push_back(ParamsToJson(r));
  Json j{{"type", "case"},   {"id", id},
         {"op", op},         {"params", ParamsToJson(params)},
         {"status", std::string(ToString(status))}, {"class", std::string(ToString(failure_class))}};
  if (!error_type.empty()) j["error_type"] = error_type;
  if (!message.empty()) j["message"] = message;
  j["rows"] = std::move(rows_json);
  j["worker"] = worker;
  j["elapsed_s"] = elapsed_s;
  j["at"] = at;
  return j;
}

JournalRecord JournalRecord::FromJson(const Json& j, const std::string& where) {
  JournalRecord r;
  try {
    if (j.at("type") != "case") throw DataError(where + ": record type '" + j.at("type").dump() + "'; expected \"case\"");
    r.id = j.at("id").get<std::string>();
    r.op = j.at("op").get<std::string>();
    r.params = ParamsFromJson(j.at("params"), where);
    auto st = ParseDisposition(j.at("status").get<std::string>());
    if (!st) throw DataError(where + ": unknown status " + j.at("status").dump());
    r.status = *st;
    auto cls = ParseFailureClass(j.at("class").get<std::string>());
    if (!cls) throw DataError(where + ": unknown class " + j.at("class").dump());
    r.failure_class = *cls;
    r.error_type = j.value("error_type", "");
    r.message = j.value("message", "");
    for (const auto& row : j.at("rows")) r.rows.push_back(ParamsFromJson(row, where));
    r.worker = j.value("worker", -1);
    r.elapsed_s = j.value("elapsed_s", 0.0);
    r.at = j.value("at", "");
  } catch (const Json::exception& e) {
    throw DataError(where + ": malformed case record (" + e.what() +
                    "); expected id, op, params, status, class, rows");
  }
  return r;
}

JournalContents ReadJournal(const std::string& path) {
  std::string text = ReadFile(path);
  JournalContents out;
  std::size_t pos = 0;
  int line = 0;
  bool have_header = false;
  while (pos < text.size()) {
    ++line;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.torn_tail = true;  // a crash mid-append; the record never completed
      break;
    }
    std::string_view sv(text.data() + pos, nl - pos);
    std::string where = path + ":" + std::to_string(line);
    if (sv.empty()) throw DataError(where + ": empty line; expected one JSON record per line");
    Json j;
    try {
      j = Json::parse(sv);
    } catch (const Json::parse_error& e) {
      throw DataError(where + ": not valid JSON (" + e.what() + "); expected one JSON record per line");
    }
    if (!have_header) {
      out.header = JournalHeader::FromJson(j, where);
      out.sessions.push_back({out.header.servecast_commit, out.header.created_at});
      have_header = true;
    } else if (j.is_object() && j.value("type", "") == "session") {
      if (!j.contains("servecast_commit") || !j.at("servecast_commit").is_string() || !j.contains("started_at") ||
          !j.at("started_at").is_string())
        throw DataError(where + ": malformed session record; expected servecast_commit and started_at strings");
      out.sessions.push_back({j.at("servecast_commit").get<std::string>(), j.at("started_at").get<std::string>()});
    } else {
      out.records.push_back(JournalRecord::FromJson(j, where));
    }
    pos = nl + 1;
    out.valid_bytes = pos;
  }
  if (!have_header) throw DataError(path + ":1: journal has no header record; expected a servecast journal");
  return out;
}

namespace {

void WriteAll(int fd, const std::string& data, const std::string& path) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("cannot append to journal " + path, errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void JournalWriter::AddSession(const JournalSession& session) {
  pending_ += Json{{"type", "session"}, {"servecast_commit", session.servecast_commit}, {"started_at", session.started_at}}
                  .dump(-1, ' ', false, Json::error_handler_t::replace) +
              "\n";
}

std::vector<JournalSession> SessionsFromLog(const std::string& collector_log) {
  std::vector<JournalSession> out;
  if (!PathExists(collector_log)) return out;
  const std::string text = ReadFile(collector_log);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    // "<time> info: servecast <version> (<commit>) collect: ..." (collector.cpp writes it first in every call)
    const std::size_t sp = line.find(' ');
    const std::size_t open = line.find(" (");
    const std::size_t close = line.find(") collect: ");
    if (sp == std::string_view::npos || line.substr(sp, 17) != " info: servecast " || open == std::string_view::npos ||
        close == std::string_view::npos || close < open)
      continue;
    const std::string at(line.substr(0, sp));
    if (!ParseUtcSeconds(at)) continue;
    out.push_back({std::string(line.substr(open + 2, close - open - 2)), at});
  }
  return out;
}

const JournalSession& SessionOf(const std::vector<JournalSession>& sessions, const std::string& at) {
  const std::optional<std::int64_t> t = ParseUtcSeconds(at);
  const JournalSession* found = &sessions.front();
  if (!t) return *found;
  for (const JournalSession& s : sessions) {
    const std::optional<std::int64_t> st = ParseUtcSeconds(s.started_at);
    if (st && *st <= *t) found = &s;
  }
  return *found;
}

JournalWriter JournalWriter::Create(const std::string& path, const JournalHeader& header) {
  JournalWriter w;
  w.path_ = path;
  w.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (w.fd_ < 0) throw SystemError("cannot create journal " + path, errno);
  w.pending_ = header.ToJson().dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  w.Commit();
  auto slash = path.find_last_of('/');
  SyncDirectory(slash == std::string::npos ? "." : path.substr(0, slash));
  return w;
}

JournalWriter JournalWriter::Append(const std::string& path, std::uint64_t resume_bytes) {
  JournalWriter w;
  w.path_ = path;
  w.fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (w.fd_ < 0) throw SystemError("cannot open journal " + path, errno);
  if (::ftruncate(w.fd_, static_cast<off_t>(resume_bytes)) != 0) throw SystemError("cannot truncate " + path, errno);
  if (::fdatasync(w.fd_) != 0) throw SystemError("cannot sync " + path, errno);
  return w;
}

JournalWriter::JournalWriter(JournalWriter&& o) noexcept
    : fd_(o.fd_), path_(std::move(o.path_)), pending_(std::move(o.pending_)) {
  o.fd_ = -1;
}

JournalWriter& JournalWriter::operator=(JournalWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    pending_ = std::move(o.pending_);
    o.fd_ = -1;
  }
  return *this;
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) {
    try {
      Commit();
    } catch (...) {
    }
    ::close(fd_);
  }
}

void JournalWriter::Add(const JournalRecord& record) {
  pending_ += record.ToJson().dump(-1, ' ', false, Json::error_handler_t::replace);
  pending_ += '\n';
}

void JournalWriter::Commit() {
  if (pending_.empty()) return;
  WriteAll(fd_, pending_, path_);
  if (::fdatasync(fd_) != 0) throw SystemError("cannot sync journal " + path_, errno);
  pending_.clear();
}

JournalRecord MakeRecord(const Case& c, Disposition status, FailureClass cls, std::string error_type,
                         std::string message, std::vector<Params> rows, int worker, double elapsed_s) {
  JournalRecord r;
  r.id = c.id;
  r.op = c.op;
  r.params = c.params;
  r.status = status;
  r.failure_class = cls;
  r.error_type = std::move(error_type);
  r.message = std::move(message);
  r.rows = std::move(rows);
  r.worker = worker;
  r.elapsed_s = elapsed_s;
  r.at = UtcNow();
  return r;
}

}  // namespace servecast::collect
