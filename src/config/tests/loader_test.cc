#include "config/loader.h"

#include <gtest/gtest.h>

#include "config/setting.h"
#include "config/tests/test_util.h"

namespace magnetar::config {
namespace {

using testing::TempDir;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ParseConfigText, CommentsBlankLinesAndTrimming) {
  std::vector<std::string> warnings;
  auto lines = parseConfigText(
      "# a comment\n"
      "\n"
      "   \t\n"
      "  brokerServicePort = 7000  \r\n"
      "   # indented comment\n"
      "clusterName=a=b\n"
      "advertisedAddress=\n"
      "not a setting line\n"
      "webServicePort=9000 # not a comment",
      "t.conf", &warnings);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].key, "brokerServicePort");
  EXPECT_EQ(lines[0].value, "7000");
  EXPECT_EQ(lines[0].line, 4);
  EXPECT_EQ(lines[1].value, "a=b");
  EXPECT_EQ(lines[2].value, "");
  EXPECT_EQ(lines[3].value, "9000 # not a comment");
  EXPECT_EQ(lines[3].line, 9);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "t.conf:8")) << warnings[0];
}

TEST(LoadConfiguration, DefaultsOnly) {
  auto r = loadConfiguration({"", {}, 16});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config->numIOThreads(), 8);
  EXPECT_EQ(r->config->brokerServicePort(), 6650);
  EXPECT_TRUE(r->warnings.empty());
}

TEST(LoadConfiguration, FileValuesEmptyMeansDefaultAndUnknownKeyWarns) {
  TempDir d;
  std::string path = d.write("broker.conf",
                             "# test\n"
                             "brokerServicePort=7001\n"
                             "clusterName=\n"
                             "numIOThreads=\n"
                             "\n"
                             "someFutureKey=1\n"
                             "journalSyncData=false\n");
  auto r = loadConfiguration({path, {}, 16});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const auto& cfg = *r->config;
  EXPECT_EQ(cfg.brokerServicePort(), 7001);
  EXPECT_EQ(cfg.clusterName(), "standalone");
  EXPECT_EQ(cfg.numIOThreads(), 8);
  EXPECT_FALSE(cfg.journalSyncData());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], path + ":6: unknown key 'someFutureKey' (ignored)");
}

TEST(LoadConfiguration, BadValueInFileNamesKeyValueFileAndLine) {
  TempDir d;
  struct Case {
    std::string line;
    std::string expected;
  };
  const Case kCases[] = {
      {"numIOThreads=abc", "invalid value 'abc' for numIOThreads at {}:3: not an integer"},
      {"numIOThreads=-2", "invalid value '-2' for numIOThreads at {}:3: below the minimum 0"},
      {"maxMessagePublishBufferSizeInMB=-5",
       "invalid value '-5' for maxMessagePublishBufferSizeInMB at {}:3: below the minimum -1"},
      {"webServicePort=70000",
       "invalid value '70000' for webServicePort at {}:3: above the maximum 65535"},
      {"allowAutoTopicCreationType=both",
       "invalid value 'both' for allowAutoTopicCreationType at {}:3: expected one of "
       "non-partitioned, partitioned"},
  };
  for (const auto& c : kCases) {
    std::string path = d.write("bad.conf", "# x\n\n" + c.line + "\nclusterName=c1\n");
    auto r = loadConfiguration({path, {}, 4});
    ASSERT_FALSE(r.isOk()) << c.line;
    std::string expected = c.expected;
    expected.replace(expected.find("{}"), 2, path);
    EXPECT_EQ(r.status().message(), expected);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(LoadConfiguration, SetOverridesFileAndLaterSetWins) {
  TempDir d;
  std::string path = d.write("b.conf", "numIOThreads=4\nclusterName=fromFile\n");
  auto r = loadConfiguration(
      {path, {"numIOThreads=12", "clusterName=fromSet", "clusterName= last "}, 16});
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->config->numIOThreads(), 12);
  EXPECT_EQ(r->config->ioThreads().reason, "12, configured");
  EXPECT_EQ(r->config->clusterName(), "last");

  auto fileOnly = loadConfiguration({path, {}, 16});
  ASSERT_TRUE(fileOnly.isOk());
  EXPECT_EQ(fileOnly->config->numIOThreads(), 4);

  // --set with an empty value restores the default over the file's value.
  auto reset = loadConfiguration({path, {"numIOThreads="}, 16});
  ASSERT_TRUE(reset.isOk());
  EXPECT_EQ(reset->config->numIOThreads(), 8);
}

TEST(LoadConfiguration, SetErrors) {
  auto bad = loadConfiguration({"", {"numIOThreads=abc"}, 4});
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "invalid value 'abc' for numIOThreads (--set): not an integer");

  auto unknown = loadConfiguration({"", {"numIoThreads=4"}, 4});
  ASSERT_FALSE(unknown.isOk());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(unknown.status().message(), "numIoThreads"));

  auto malformed = loadConfiguration({"", {"numIOThreads"}, 4});
  ASSERT_FALSE(malformed.isOk());
  EXPECT_TRUE(contains(malformed.status().message(), "KEY=VALUE"));
}

TEST(LoadConfiguration, MissingFileAndDuplicates) {
  auto missing = loadConfiguration({"/nonexistent/magnetar.conf", {}, 4});
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(contains(missing.status().message(), "/nonexistent/magnetar.conf"));

  TempDir d;
  // A directory opens as an empty stream on Linux: it must be refused, not read as no settings.
  auto dir = loadConfiguration({d.path().string(), {}, 4});
  ASSERT_FALSE(dir.isOk());
  EXPECT_EQ(dir.status().code(), StatusCode::kIoError);
  EXPECT_TRUE(contains(dir.status().message(), "is a directory")) << dir.status().message();

  std::string path = d.write("dup.conf", "webServicePort=9001\nwebServicePort=9002\n");
  auto r = loadConfiguration({path, {}, 4});
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->config->webServicePort(), 9002);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(contains(r->warnings[0], path + ":2")) << r->warnings[0];
}

TEST(LoadConfiguration, KeysNotEnforcedYetWarnWhenSet) {
  EXPECT_FALSE(settingEnforced("topicFactoryClassName"));
  EXPECT_TRUE(settingEnforced("numIOThreads"));
  auto quiet = loadConfiguration({"", {"numIOThreads=3", "topicFactoryClassName="}, 4});
  ASSERT_TRUE(quiet.isOk());
  EXPECT_TRUE(quiet->warnings.empty()) << quiet->warnings.front();
  auto r = loadConfiguration({"", {"topicFactoryClassName=com.example.Factory"}, 4});
  ASSERT_TRUE(r.isOk());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(contains(r->warnings[0], "topicFactoryClassName")) << r->warnings[0];
  EXPECT_TRUE(contains(r->warnings[0], "not enforced yet")) << r->warnings[0];
}

TEST(LoadConfiguration, AvailableProcessorsOptionDrivesDefaults) {
  auto r = loadConfiguration({"", {}, 128});
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->config->availableProcessors(), 128);
  EXPECT_EQ(r->config->numIOThreads(), 64);
  EXPECT_EQ(r->config->managedLedgerNumWorkerThreads(), 128);
  auto detected = loadConfiguration({"", {}, 0});
  ASSERT_TRUE(detected.isOk());
  EXPECT_EQ(detected->config->availableProcessors(), availableProcessors());
}

}  // namespace
}  // namespace magnetar::config
