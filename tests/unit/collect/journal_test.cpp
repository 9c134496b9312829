#include "collect/journal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "collect_test_util.h"
#include "core/error.h"
#include "core/fs.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

JournalHeader Header() {
  JournalHeader h;
  h.backend = "cpu";
  h.version = "openblas0.3.21";
  h.device = "Test CPU";
  h.arch = "haswell";
  h.sm = 0;
  h.system = "test_system";
  h.plan_hash = std::string(64, 'a');
  h.shard_index = 1;
  h.shard_count = 4;
  h.servecast_commit = "0123456789ab";
  h.created_at = "2025-01-02T03:04:05Z";
  return h;
}

JournalRecord Record(std::int64_t m, Disposition status = Disposition::kPassed, double latency = 1.5) {
  JournalRecord r;
  r.op = "gemm";
  r.params = Params{{"gemm_dtype", std::string("bfloat16")}, {"m", m}, {"n", std::int64_t{8}}, {"scale", 0.25}};
  r.id = MakeCaseId(r.op, r.params);
  r.status = status;
  if (status == Disposition::kPassed) {
    r.rows.push_back(Params{{"op_name", std::string("gemm")}, {"m", m}, {"latency", latency}});
  } else {
    r.failure_class = FailureClass::kFrameworkBug;
    r.error_type = "LibraryError";
    r.message = "status 7: \"not supported\"\nsecond line";
  }
  r.worker = 2;
  r.elapsed_s = 0.125;
  r.at = "2025-01-02T03:04:06Z";
  return r;
}

void ExpectSameRecord(const JournalRecord& a, const JournalRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.failure_class, b.failure_class);
  EXPECT_EQ(a.error_type, b.error_type);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.worker, b.worker);
  EXPECT_DOUBLE_EQ(a.elapsed_s, b.elapsed_s);
  EXPECT_EQ(a.at, b.at);
}

void AppendRaw(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl - pos));
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

TEST(JournalHeaderTest, MismatchIsEmptyForTheSameRun) {
  EXPECT_EQ(Header().Mismatch(Header()), "");
}

TEST(JournalHeaderTest, MismatchSaysWhatDiffersFieldByField) {
  JournalHeader other = Header();
  other.version = "openblas0.3.26";
  other.plan_hash = std::string(64, 'b');
  EXPECT_EQ(Header().Mismatch(other),
            "library stack: journal has 'openblas0.3.21', this run has 'openblas0.3.26'; "
            "plan: journal has '" +
                std::string(64, 'a') + "', this run has '" + std::string(64, 'b') + "'");
  other = Header();
  other.backend = "cuda";
  other.sm = 90;
  other.shard_index = 0;
  std::string diff = Header().Mismatch(other);
  EXPECT_TRUE(HasText(diff, "backend: journal has 'cpu', this run has 'cuda'"));
  EXPECT_TRUE(HasText(diff, "sm: journal has '0', this run has '90'"));
  EXPECT_TRUE(HasText(diff, "shard: journal has '1/4', this run has '0/4'"));
  other = Header();
  other.device = "Other CPU";
  other.arch = "zen4";
  other.system = "other_system";
  diff = Header().Mismatch(other);
  EXPECT_TRUE(HasText(diff, "device: journal has 'Test CPU'"));
  EXPECT_TRUE(HasText(diff, "arch: journal has 'haswell'"));
  EXPECT_TRUE(HasText(diff, "system: journal has 'test_system'"));
}

TEST(JournalHeaderTest, MismatchIgnoresCommitAndCreationTime) {
  JournalHeader other = Header();
  other.servecast_commit = "ffffffffffff";
  other.created_at = "2030-01-01T00:00:00Z";
  EXPECT_EQ(Header().Mismatch(other), "");
}

TEST(JournalHeaderTest, JsonRoundTrip) {
  JournalHeader h = JournalHeader::FromJson(Header().ToJson(), "j:1");
  EXPECT_EQ(h.Mismatch(Header()), "");
  EXPECT_EQ(h.shard_index, 1);
  EXPECT_EQ(h.shard_count, 4);
  EXPECT_EQ(h.servecast_commit, "0123456789ab");
  EXPECT_EQ(h.created_at, "2025-01-02T03:04:05Z");
  EXPECT_EQ(Header().ToJson()["shard"], "1/4");
}

TEST(JournalHeaderTest, MalformedHeadersAreDataErrors) {
  Json j = Header().ToJson();
  j["schema"] = "servecast-journal-0";
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { JournalHeader::FromJson(j, "x.jsonl:1"); }),
                      "x.jsonl:1: journal schema 'servecast-journal-0'"));
  j = Header().ToJson();
  j.erase("plan_hash");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { JournalHeader::FromJson(j, "x.jsonl:1"); }),
                      "x.jsonl:1: malformed journal header"));
  j = Header().ToJson();
  j["shard"] = "1";
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { JournalHeader::FromJson(j, "x.jsonl:1"); }), "expected I/N"));
  j = Header().ToJson();
  j["type"] = "case";
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { JournalHeader::FromJson(j, "x.jsonl:1"); }), "not a header"));
}

// journal.h: "any other malformed line is a DataError naming the file, the line and
// what was expected" -- a header whose shard is not I/N numbers is such a line.
TEST(JournalTest, NonNumericShardInTheHeaderIsDataErrorNamingPathAndLine) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  Json j = Header().ToJson();
  j["shard"] = "one/four";
  WriteFileAtomic(path, j.dump() + "\n" + Record(1).ToJson().dump() + "\n");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ReadJournal(path); }), path + ":1"));
}

TEST(JournalTest, WriteAndReadBack) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  std::vector<JournalRecord> written = {Record(1), Record(2, Disposition::kFailed), Record(3)};
  {
    JournalWriter w = JournalWriter::Create(path, Header());
    w.Add(written[0]);
    w.Add(written[1]);
    w.Commit();
    w.Add(written[2]);
    w.Commit();
  }
  JournalContents jc = ReadJournal(path);
  EXPECT_EQ(jc.header.Mismatch(Header()), "");
  ASSERT_EQ(jc.records.size(), 3u);
  for (std::size_t i = 0; i < written.size(); ++i) ExpectSameRecord(jc.records[i], written[i]);
  EXPECT_FALSE(jc.torn_tail);
  EXPECT_EQ(jc.valid_bytes, ReadFile(path).size());
  EXPECT_EQ(Lines(ReadFile(path)).size(), 4u);  // one header and one line per record
}

TEST(JournalTest, ValueTypesSurviveTheRoundTrip) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  JournalRecord r = Record(7);
  r.params.Set("whole_double", 3.0);
  r.params.Set("big", std::int64_t{9007199254740993});
  r.params.Set("text", std::string("a \"quoted\", line\nbreak"));
  {
    JournalWriter w = JournalWriter::Create(path, Header());
    w.Add(r);
    w.Commit();
  }
  JournalContents jc = ReadJournal(path);
  ASSERT_EQ(jc.records.size(), 1u);
  const Params& p = jc.records[0].params;
  EXPECT_EQ(TypeOf(p.Get("whole_double")), ValueType::kDouble);
  EXPECT_EQ(p.Int("big"), 9007199254740993);
  EXPECT_EQ(p.Str("text"), "a \"quoted\", line\nbreak");
  EXPECT_EQ(p, r.params);  // order kept
}

TEST(JournalTest, UncommittedRecordsAreWrittenWhenTheWriterCloses) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  {
    JournalWriter w = JournalWriter::Create(path, Header());
    w.Add(Record(1));
  }
  EXPECT_EQ(ReadJournal(path).records.size(), 1u);
}

TEST(JournalTest, CreateRefusesAnExistingJournal) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  { JournalWriter::Create(path, Header()).Add(Record(1)); }
  std::string before = ReadFile(path);
  EXPECT_THROW(JournalWriter::Create(path, Header()), SystemError);
  EXPECT_EQ(ReadFile(path), before);
}

TEST(JournalTest, NonFiniteValuesAreRefused) {
  JournalRecord r = Record(1);
  r.rows[0].Set("latency", std::nan(""));
  TempDir dir;
  JournalWriter w = JournalWriter::Create(dir.File("j.jsonl"), Header());
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { w.Add(r); }), "value of 'latency' is not finite"));
}

TEST(JournalTest, TornLastLineIsDroppedWithValidBytes) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  {
    JournalWriter w = JournalWriter::Create(path, Header());
    w.Add(Record(1));
    w.Add(Record(2));
  }
  std::uint64_t whole = ReadFile(path).size();
  std::string partial = Record(3).ToJson().dump();
  AppendRaw(path, partial.substr(0, partial.size() / 2));  // crash mid-append
  JournalContents jc = ReadJournal(path);
  EXPECT_TRUE(jc.torn_tail);
  EXPECT_EQ(jc.valid_bytes, whole);
  ASSERT_EQ(jc.records.size(), 2u);
  EXPECT_EQ(jc.records[1].id, Record(2).id);
}

TEST(JournalTest, CompleteJsonWithoutItsNewlineIsStillTorn) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  { JournalWriter::Create(path, Header()).Add(Record(1)); }
  std::uint64_t whole = ReadFile(path).size();
  AppendRaw(path, Record(2).ToJson().dump());  // the newline never made it
  JournalContents jc = ReadJournal(path);
  EXPECT_TRUE(jc.torn_tail);
  EXPECT_EQ(jc.valid_bytes, whole);
  EXPECT_EQ(jc.records.size(), 1u);
}

TEST(JournalTest, CorruptMiddleLineIsDataErrorNamingPathAndLine) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  { JournalWriter::Create(path, Header()).Add(Record(1)); }
  AppendRaw(path, "{\"type\": \"case\", \"id\": \n");  // line 3
  AppendRaw(path, Record(2).ToJson().dump() + "\n");
  std::string msg = ThrownMessage<DataError>([&] { ReadJournal(path); });
  EXPECT_TRUE(HasText(msg, path + ":3"));
  EXPECT_TRUE(HasText(msg, "not valid JSON"));
}

TEST(JournalTest, MalformedRecordsAreDataErrorsNamingPathAndLine) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  { JournalWriter::Create(path, Header()).Add(Record(1)); }
  std::string good = ReadFile(path);

  Json bad_status = Record(2).ToJson();
  bad_status["status"] = "exploded";
  WriteFileAtomic(path, good + bad_status.dump() + "\n");
  std::string msg = ThrownMessage<DataError>([&] { ReadJournal(path); });
  EXPECT_TRUE(HasText(msg, path + ":3: unknown status \"exploded\""));

  Json no_rows = Record(2).ToJson();
  no_rows.erase("rows");
  WriteFileAtomic(path, good + no_rows.dump() + "\n" + Record(3).ToJson().dump() + "\n");
  msg = ThrownMessage<DataError>([&] { ReadJournal(path); });
  EXPECT_TRUE(HasText(msg, path + ":3: malformed case record"));

  WriteFileAtomic(path, good + "\n" + Record(3).ToJson().dump() + "\n");
  msg = ThrownMessage<DataError>([&] { ReadJournal(path); });
  EXPECT_TRUE(HasText(msg, path + ":3: empty line"));

  Json list_param = Record(2).ToJson();
  list_param["params"]["m"] = Json::array({1, 2});
  WriteFileAtomic(path, good + list_param.dump() + "\n");
  msg = ThrownMessage<DataError>([&] { ReadJournal(path); });
  EXPECT_TRUE(HasText(msg, path + ":3: value of 'm' is array"));
}

TEST(JournalTest, JournalWithoutHeaderIsDataError) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  WriteFileAtomic(path, "");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ReadJournal(path); }), path + ":1: journal has no header"));
  WriteFileAtomic(path, Record(1).ToJson().dump() + "\n");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ReadJournal(path); }), path + ":1: first record is not a header"));
  EXPECT_THROW(ReadJournal(dir.File("missing.jsonl")), DataError);
}

TEST(JournalTest, AppendTruncatesTheTornTailThenAppends) {
  TempDir dir;
  std::string path = dir.File("journal.jsonl");
  {
    JournalWriter w = JournalWriter::Create(path, Header());
    w.Add(Record(1));
    w.Add(Record(2, Disposition::kFailed));
  }
  AppendRaw(path, "{\"type\":\"case\",\"id\":\"gem");  // torn
  JournalContents before = ReadJournal(path);
  ASSERT_TRUE(before.torn_tail);
  {
    JournalWriter w = JournalWriter::Append(path, before.valid_bytes);
    w.Add(Record(2));  // the retry of the failed case
    w.Add(Record(3));
    w.Commit();
  }
  JournalContents after = ReadJournal(path);
  EXPECT_FALSE(after.torn_tail);
  EXPECT_EQ(after.valid_bytes, ReadFile(path).size());
  ASSERT_EQ(after.records.size(), 4u);
  ExpectSameRecord(after.records[0], Record(1));
  ExpectSameRecord(after.records[1], Record(2, Disposition::kFailed));
  ExpectSameRecord(after.records[2], Record(2));
  ExpectSameRecord(after.records[3], Record(3));
  EXPECT_EQ(ReadFile(path).find("\"gem{"), std::string::npos);
}

TEST(JournalTest, AppendToAMissingJournalFails) {
  TempDir dir;
  EXPECT_THROW(JournalWriter::Append(dir.File("none.jsonl"), 0), SystemError);
}

TEST(JournalTest, ParamsJsonHelpers) {
  Params p{{"a", std::int64_t{1}}, {"b", 2.5}, {"c", std::string("x")}};
  Json j = ParamsToJson(p);
  EXPECT_EQ(j.dump(), "{\"a\":1,\"b\":2.5,\"c\":\"x\"}");
  EXPECT_EQ(ParamsFromJson(j, "w"), p);
  EXPECT_TRUE(
      HasText(ThrownMessage<DataError>([] { ParamsFromJson(Json::array(), "here:9"); }), "here:9: expected an object"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([] {
                        ParamsFromJson(Json{{"t", true}}, "here:9");
                      }),
                      "value of 't' is boolean"));
}

TEST(JournalTest, UtcNowIsIso8601Seconds) {
  std::string t = UtcNow();
  ASSERT_EQ(t.size(), 20u) << t;
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t[19], 'Z');
  EXPECT_TRUE(ParseUtcSeconds(t).has_value()) << t;
}

TEST(JournalTest, FormatUtcSecondsWritesWhatParseUtcSecondsReads) {
  EXPECT_EQ(FormatUtcSeconds(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatUtcSeconds(1796031520), "2026-11-30T09:38:40Z");
  EXPECT_EQ(FormatUtcSeconds(946684800), "2000-01-01T00:00:00Z");
  // Leap days, and the second after the last one of a year.
  for (const char* t : {"2024-02-29T00:00:00Z", "2024-02-29T23:59:59Z", "2000-02-29T12:34:56Z", "1972-02-29T00:00:01Z",
                        "2025-12-31T23:59:59Z", "1969-12-31T23:59:59Z"}) {
    std::optional<std::int64_t> s = ParseUtcSeconds(t);
    ASSERT_TRUE(s.has_value()) << t;
    EXPECT_EQ(FormatUtcSeconds(*s), t);
  }
  EXPECT_EQ(FormatUtcSeconds(*ParseUtcSeconds("2024-02-28T23:59:59Z") + 1), "2024-02-29T00:00:00Z");
  EXPECT_EQ(FormatUtcSeconds(*ParseUtcSeconds("2024-02-29T23:59:59Z") + 1), "2024-03-01T00:00:00Z");
  EXPECT_EQ(FormatUtcSeconds(*ParseUtcSeconds("2023-02-28T23:59:59Z") + 1), "2023-03-01T00:00:00Z");
  EXPECT_EQ(FormatUtcSeconds(*ParseUtcSeconds("2025-12-31T23:59:59Z") + 1), "2026-01-01T00:00:00Z");
  // Every second of a leap day's neighbourhood and beyond, in steps that hit every field.
  const std::int64_t from = *ParseUtcSeconds("2024-02-27T00:00:00Z");
  for (std::int64_t s = from; s < from + 4 * 86400 + 7; s += 997) EXPECT_EQ(ParseUtcSeconds(FormatUtcSeconds(s)), s);
  const std::string now = UtcNow();
  EXPECT_EQ(FormatUtcSeconds(*ParseUtcSeconds(now)), now);
}

TEST(JournalTest, ParseUtcSecondsReadsUtcNowsFormatOnly) {
  EXPECT_EQ(ParseUtcSeconds("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseUtcSeconds("1970-01-02T00:00:01Z"), 86401);
  EXPECT_EQ(ParseUtcSeconds("2000-03-01T00:00:00Z"), 951868800);  // after a 400-year leap day
  EXPECT_EQ(ParseUtcSeconds("2026-11-30T09:38:40Z"), 1796031520);
  EXPECT_EQ(ParseUtcSeconds("1969-12-31T23:59:59Z"), -1);
  EXPECT_EQ(*ParseUtcSeconds("2024-02-29T12:00:00Z") + 86400, ParseUtcSeconds("2024-03-01T12:00:00Z"));
  EXPECT_EQ(*ParseUtcSeconds("2026-11-30T09:38:40Z") + 1, ParseUtcSeconds("2026-11-30T09:38:41Z"));
  // Anything else is no time: other layouts, offsets, fractions, impossible dates.
  for (const char* bad :
       {"", "2026-11-30", "2026-11-30T09:38:40", "2026-11-30 09:38:40Z", "2026-11-30T09:38:40z",
        "2026-11-30T09:38:40+00:00", "2026-11-30T09:38:40.5Z", "2026-11-30T9:38:40Z", "+026-11-30T09:38:40Z",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-11-31T00:00:00Z", "2026-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T09:60:00Z", "2026-11-30T09:38:60Z",
        " 2026-11-30T09:38:40Z"})
    EXPECT_FALSE(ParseUtcSeconds(bad).has_value()) << bad;
}

}  // namespace
}  // namespace servecast::collect
