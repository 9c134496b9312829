// Every reference to a document in the sources, tests, benchmarks, scripts and docs
// leads somewhere: `docs/<name>.md` exists, and a section it names
// (`docs/perfdb.md, "Loading"`) is a heading of that file or the bold title of one of
// its paragraphs (`**Data roots by name.**`); relative Markdown links of README.md
// and docs/*.md name files that exist. (Issue 28 item 10: comments pointed at
// docs/perfdb_grid.md and other files that no longer exist.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kSource = SERVECAST_SOURCE_DIR;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Text files under the folders a reader follows references from.
std::vector<fs::path> SourceFiles() {
  std::vector<fs::path> out = {kSource / "README.md"};
  for (const char* dir : {"src", "tests", "benchmarks", "scripts", "docs", "cases", "engines"}) {
    if (!fs::is_directory(kSource / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(kSource / dir)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      for (const char* want : {".h", ".cpp", ".cu", ".cuh", ".md", ".sh", ".py", ".yaml", ".txt"})
        if (ext == want) out.push_back(e.path());
    }
  }
  return out;
}

// The headings (without the #s) and bold paragraph titles (without the ** and the
// final period) of a Markdown file.
std::vector<std::string> Sections(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  const std::regex bold(R"(\*\*([^*]+?)\.?\*\*)");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') {
      const std::size_t b = line.find_first_not_of("# ");
      if (b != std::string::npos) out.push_back(line.substr(b));
    }
    for (std::sregex_iterator it(line.begin(), line.end(), bold), end; it != end; ++it) out.push_back((*it)[1]);
  }
  return out;
}

TEST(DocReferences, EveryDocumentAndSectionNamedExists) {
  const std::regex ref(R"re(docs/([A-Za-z0-9_-]+)\.md(,? ["“]([^"”]+)["”])?)re");
  std::vector<std::string> dangling;
  std::size_t seen = 0;
  for (const fs::path& file : SourceFiles()) {
    if (file.filename() == "doc_references_test.cpp") continue;  // its own examples
    const std::string text = Read(file);
    for (std::sregex_iterator it(text.begin(), text.end(), ref), end; it != end; ++it) {
      ++seen;
      const fs::path doc = kSource / "docs" / ((*it)[1].str() + ".md");
      const std::string where = fs::relative(file, kSource).string() + ": " + (*it)[0].str();
      if (!fs::is_regular_file(doc)) {
        dangling.push_back(where + " (no such file)");
        continue;
      }
      if (!(*it)[3].matched) continue;
      // A name broken over lines of a comment or a paragraph reads as one line.
      const std::string section = std::regex_replace((*it)[3].str(), std::regex(R"(\s*\n\s*(//|#)?\s*)"), " ");
      bool found = false;
      for (const std::string& s : Sections(Read(doc))) found = found || s.rfind(section, 0) == 0;
      if (!found) dangling.push_back(where + " (no such section)");
    }
  }
  EXPECT_GT(seen, 50u);  // the scan reads the tree
  std::string all;
  for (const auto& d : dangling) all += "\n  " + d;
  EXPECT_TRUE(dangling.empty()) << dangling.size() << " dangling references:" << all;
}

TEST(DocReferences, MarkdownLinksNameFilesThatExist) {
  const std::regex link(R"(\]\(([^)#: ]+\.md)[)#])");
  std::vector<fs::path> docs = {kSource / "README.md"};
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  std::vector<std::string> dangling;
  std::size_t seen = 0;
  for (const fs::path& file : docs) {
    const std::string text = Read(file);
    for (std::sregex_iterator it(text.begin(), text.end(), link), end; it != end; ++it) {
      ++seen;
      if (!fs::exists(file.parent_path() / (*it)[1].str()))
        dangling.push_back(fs::relative(file, kSource).string() + ": " + (*it)[1].str());
    }
  }
  EXPECT_GT(seen, 20u);
  std::string all;
  for (const auto& d : dangling) all += "\n  " + d;
  EXPECT_TRUE(dangling.empty()) << dangling.size() << " dangling links:" << all;
}

}  // namespace
