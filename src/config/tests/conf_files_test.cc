// Checks the committed conf/broker.conf, conf/standalone.conf and docs/configuration.md against
// the registry (read from the source tree: MAGNETAR_SOURCE_DIR).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "config/loader.h"
#include "config/render.h"
#include "config/setting.h"
#include "config/text.h"

namespace magnetar::config {
namespace {

std::string sourcePath(const std::string& rel) {
  return std::string(MAGNETAR_SOURCE_DIR) + "/" + rel;
}

std::string readFile(const std::string& rel) {
  std::ifstream in(sourcePath(rel));
  EXPECT_TRUE(in.good()) << "cannot read " << sourcePath(rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// key -> the comment text directly above it (lines joined with ' ', without "# ").
std::map<std::string, std::string> keysWithComments(const std::string& text) {
  std::map<std::string, std::string> out;
  std::vector<std::string> comment;
  for (const auto& raw : splitLines(text)) {
    std::string_view l = trim(raw);
    if (l.empty()) {
      comment.clear();
    } else if (l.front() == '#') {
      l.remove_prefix(1);
      comment.emplace_back(trim(l));
    } else if (size_t eq = l.find('='); eq != std::string_view::npos) {
      std::string joined;
      for (const auto& c : comment) joined += (joined.empty() ? "" : " ") + c;
      out[std::string(trim(l.substr(0, eq)))] = joined;
      comment.clear();
    }
  }
  return out;
}

const char* const kRegenerate =
    "regenerate: build/src/app/magnetar config docs --format conf > conf/broker.conf";

TEST(ConfFiles, BrokerConfIsTheRenderedRegistry) {
  EXPECT_EQ(readFile("conf/broker.conf"), renderBrokerConf()) << kRegenerate;
}

TEST(ConfFiles, EveryRegistryKeyIsInBrokerConfWithItsDoc) {
  auto keys = keysWithComments(readFile("conf/broker.conf"));
  for (const auto& def : allSettings()) {
    auto it = keys.find(def.name);
    ASSERT_NE(it, keys.end()) << def.name << " missing from conf/broker.conf; " << kRegenerate;
    std::string_view notes = settingNotes(def.name);
    std::string expected =
        notes.empty() ? def.doc : std::string(trim(notes.substr(0, notes.find('\n'))));
    EXPECT_NE(it->second.find(expected), std::string::npos)
        << def.name << ": doc not above the key in conf/broker.conf";
  }
}

TEST(ConfFiles, EveryKeyInTheConfFilesIsARegistryKeyAndLoadsCleanly) {
  for (const char* rel : {"conf/broker.conf", "conf/standalone.conf"}) {
    SCOPED_TRACE(rel);
    for (const auto& [key, comment] : keysWithComments(readFile(rel))) {
      EXPECT_NE(findSetting(key), nullptr) << key << " is not a registry key";
    }
    auto r = loadConfiguration({sourcePath(rel), {}, 16});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
    EXPECT_EQ(r->config->numIOThreads(), 8) << "conf files leave numIOThreads to the formula";
  }
}

TEST(ConfFiles, StandaloneOverrides) {
  auto r = loadConfiguration({sourcePath("conf/standalone.conf"), {}, 4});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_FALSE(r->config->journalSyncData());
  EXPECT_FALSE(r->config->loadBalancerEnabled());
  EXPECT_EQ(r->config->clusterName(), "standalone");
  EXPECT_EQ(r->config->journalDirectory().rfind("data/", 0), 0u);
  EXPECT_EQ(r->config->metadataStoreUrl().rfind("rocksdb:data/", 0), 0u);
}

TEST(ConfFiles, NumIOThreadsIsExplainedInBothConfFilesAndTheDocs) {
  const std::string kFormula = "min(2n, max(8, n/2))";
  const std::string kSymptom = "the busiest pulsar-io thread stays busy";
  for (const char* rel : {"conf/broker.conf", "conf/standalone.conf", "docs/configuration.md"}) {
    SCOPED_TRACE(rel);
    std::string text = readFile(rel);
    EXPECT_NE(text.find(kFormula), std::string::npos);
    EXPECT_NE(text.find(kSymptom), std::string::npos);
    EXPECT_NE(text.find("backlogs grow"), std::string::npos);
  }
  // The conf files carry the table rows of the notes verbatim.
  std::string notes(settingNotes("numIOThreads"));
  for (const char* rel : {"conf/broker.conf", "conf/standalone.conf"}) {
    std::string text = readFile(rel);
    for (const auto& line : splitLines(notes)) {
      if (line.find("default here") == std::string::npos &&
          line.find("old Pulsar default") == std::string::npos) {
        continue;
      }
      EXPECT_NE(text.find("# " + line), std::string::npos) << rel << ": " << line;
    }
  }
}

TEST(ConfFiles, DocsTableIsTheRenderedRegistry) {
  std::string docs = readFile("docs/configuration.md");
  size_t begin = docs.find(kDocsTableBegin);
  size_t end = docs.find(kDocsTableEnd);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  begin += kDocsTableBegin.size() + 1;  // the newline after the marker
  ASSERT_LE(begin, end);
  EXPECT_EQ(docs.substr(begin, end - begin), renderDocsTable())
      << "regenerate the table: build/src/app/magnetar config docs --format markdown";
  for (const char* must : {"maxMessagePublishBufferSizeInMB", "numHttpServerThreads",
                           "managedLedgerNumWorkerThreads", "numReadWorkerThreads"}) {
    EXPECT_NE(docs.substr(0, begin).find(must), std::string::npos) << must;
  }
}

}  // namespace
}  // namespace magnetar::config
