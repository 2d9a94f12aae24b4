// magnetar-admin topics commands (pulsar-admin's `topics` names and options).
#include <chrono>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "http_client.h"

namespace magnetar::admintool {
namespace {

struct TopicOpts {
  std::string topic, ns, sub, messageId = "latest", resetId, time, initial = "latest";
  int partitions = 0;
  int64_t count = 0, ledgerId = -1, entryId = -1, position = 1;
  bool force = false, perPartition = false, applied = false;
  DispatchRateOpts rate;
};

// "L:E" -> {"ledgerId": L, "entryId": E}; "earliest"/"latest" as Pulsar's MessageId constants.
nlohmann::json messageIdJson(const std::string& text) {
  if (text == "earliest") return {{"ledgerId", -1}, {"entryId", -1}};
  if (text == "latest") return {{"ledgerId", INT64_MAX}, {"entryId", INT64_MAX}};
  size_t colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument(text);
    return {{"ledgerId", std::stoll(text.substr(0, colon))},
            {"entryId", std::stoll(text.substr(colon + 1))}};
  } catch (const std::exception&) {
    throw UsageError("bad message id (ledgerId:entryId, earliest or latest): " + text);
  }
}

// "/admin/v2/persistent/t/ns" for "t/ns".
std::string persistentNamespacePath(const std::string& ns) {
  const std::string prefix = "/admin/v2/namespaces/";
  return "/admin/v2/persistent/" + namespacePath(ns).substr(prefix.size());
}

std::string subPath(const TopicOpts& x) {
  return topicPath(x.topic) + "/subscription/" + encodeSegment(x.sub);
}

}  // namespace

void addTopicCommands(CLI::App& app, Pending& pending) {
  auto* topics = app.add_subcommand("topics", "Persistent topics and their subscriptions");
  topics->require_subcommand(1);
  auto o = std::make_shared<TopicOpts>();
  const OptsLeaves<TopicOpts> nsLeaf{
      topics, pending, o, &TopicOpts::ns, "namespace", "tenant/namespace", persistentNamespacePath};
  const OptsLeaves<TopicOpts> topicLeaf{
      topics,   pending, o, &TopicOpts::topic, "topic", "persistent://tenant/namespace/topic",
      topicPath};
  auto subOption = [&](CLI::App* c) {
    c->add_option("-s,--subscription", o->sub, "Subscription name")->required();
    return c;
  };

  nsLeaf("list", "Topics of a namespace (partitions listed one by one)", [](const TopicOpts& x) {
    return Call{"GET", persistentNamespacePath(x.ns)};
  });
  nsLeaf("list-partitioned-topics", "Partitioned topics of a namespace", [](const TopicOpts& x) {
    return Call{"GET", persistentNamespacePath(x.ns) + "/partitioned"};
  });
  topicLeaf.call("create", "Create a non-partitioned topic", "PUT", "");
  topicLeaf("create-partitioned-topic", "Create a partitioned topic",
            [](const TopicOpts& x) {
              return Call{"PUT", topicPath(x.topic) + "/partitions", std::to_string(x.partitions)};
            })
      ->add_option("-p,--partitions", o->partitions, "Number of partitions")
      ->required();
  topicLeaf("update-partitioned-topic", "Increase the partitions",
            [](const TopicOpts& x) {
              return Call{"POST", topicPath(x.topic) + "/partitions", std::to_string(x.partitions)};
            })
      ->add_option("-p,--partitions", o->partitions, "New number of partitions")
      ->required();
  topicLeaf.call("get-partitioned-topic-metadata", "Number of partitions (0: not partitioned)",
                 "GET", "/partitions");
  topicLeaf("delete", "Delete a topic", [](const TopicOpts& x) {
    return Call{"DELETE", topicPath(x.topic) + (x.force ? "?force=true" : "")};
  })->add_flag("-f,--force", o->force, "Close connected clients first");
  topicLeaf("delete-partitioned-topic", "Delete a partitioned topic", [](const TopicOpts& x) {
    return Call{"DELETE", topicPath(x.topic) + "/partitions" + (x.force ? "?force=true" : "")};
  })->add_flag("-f,--force", o->force, "Close connected clients first");

  topicLeaf.call("stats", "Topic stats", "GET", "/stats");
  topicLeaf("partitioned-stats", "Stats of a partitioned topic", [](const TopicOpts& x) {
    return Call{"GET", topicPath(x.topic) + "/partitioned-stats?perPartition=" +
                           (x.perPartition ? "true" : "false")};
  })->add_flag("--per-partition", o->perPartition, "Include each partition's stats");
  topicLeaf.call("stats-internal", "Internal stats (ledgers, cursors)", "GET", "/internalStats");
  topicLeaf.call("partitioned-stats-internal", "Internal stats of each partition", "GET",
                 "/partitioned-internalStats");

  topicLeaf.call("subscriptions", "Subscriptions of a topic", "GET", "/subscriptions");
  auto* cs =
      subOption(topicLeaf("create-subscription", "Create a subscription", [](const TopicOpts& x) {
        return Call{"PUT", subPath(x), messageIdJson(x.messageId).dump()};
      }));
  cs->add_option("-m,--messageId", o->messageId, "Start: latest, earliest or ledgerId:entryId");
  subOption(topicLeaf("unsubscribe", "Delete a subscription", [](const TopicOpts& x) {
    return Call{"DELETE", subPath(x) + (x.force ? "?force=true" : "")};
  }))->add_flag("-f,--force", o->force, "Disconnect its consumers first");
  subOption(topicLeaf("skip", "Skip messages of a subscription",
                      [](const TopicOpts& x) {
                        return Call{"POST", subPath(x) + "/skip/" + std::to_string(x.count)};
                      }))
      ->add_option("-n,--count", o->count, "Number of messages")
      ->required();
  subOption(
      topicLeaf("clear-backlog", "Skip every message of a subscription", [](const TopicOpts& x) {
        return Call{"POST", subPath(x) + "/skip_all"};
      }));
  auto* rc =
      subOption(topicLeaf("reset-cursor", "Move a subscription's cursor", [](const TopicOpts& x) {
        if (x.time.empty() == x.resetId.empty()) {
          throw UsageError("give exactly one of --time, --messageId");
        }
        if (!x.time.empty()) {
          auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
          int64_t ts = now - parseDurationSeconds(x.time) * 1000;
          return Call{"POST", subPath(x) + "/resetcursor/" + std::to_string(ts)};
        }
        return Call{"POST", subPath(x) + "/resetcursor", messageIdJson(x.resetId).dump()};
      }));
  rc->add_option("-t,--time", o->time, "Reset to this long ago (e.g. 10m, 1h)");
  rc->add_option("-m,--messageId", o->resetId, "Reset to ledgerId:entryId (or earliest/latest)");

  topicLeaf.call("unload", "Close the topic's clients; they reconnect", "PUT", "/unload");
  topicLeaf.call("terminate", "Refuse further messages; prints the last message id", "POST",
                 "/terminate");
  topicLeaf.call("last-message-id", "Id of the last stored message", "GET", "/lastMessageId");
  auto* ex = topicLeaf("examine-message", "Print the n-th message from the start or the end",
                       [](const TopicOpts& x) {
                         Call c{"GET", topicPath(x.topic) +
                                           "/examinemessage?initialPosition=" + x.initial +
                                           "&messagePosition=" + std::to_string(x.position)};
                         c.raw = true;
                         return c;
                       });
  ex->add_option("-i,--initialPosition", o->initial, "latest or earliest");
  ex->add_option("-m,--messagePosition", o->position, "1-based position");
  auto* gm = topicLeaf("get-message-by-id", "Print one message", [](const TopicOpts& x) {
    Call c{"GET", topicPath(x.topic) + "/ledger/" + std::to_string(x.ledgerId) + "/entry/" +
                      std::to_string(x.entryId)};
    c.raw = true;
    return c;
  });
  gm->add_option("-l,--ledgerId", o->ledgerId)->required();
  gm->add_option("-e,--entryId", o->entryId)->required();
  auto* rate =
      topicLeaf("set-replicator-dispatch-rate", "Set the geo-replicators' dispatch rate of a topic",
                [](const TopicOpts& x) {
                  return Call{"POST", topicPath(x.topic) + "/replicatorDispatchRate",
                              dispatchRateBody(x.rate)};
                });
  addDispatchRateOptions(rate, o->rate, true);
  topicLeaf("get-replicator-dispatch-rate", "Get a topic's replicator dispatch rate",
            [](const TopicOpts& x) {
              return Call{"GET", topicPath(x.topic) + "/replicatorDispatchRate" +
                                     (x.applied ? "?applied=true" : "")};
            })
      ->add_flag("--applied", o->applied, "The rate in force (namespace's or broker default)");
  topicLeaf.call("remove-replicator-dispatch-rate", "Remove a topic's replicator dispatch rate",
                 "DELETE", "/replicatorDispatchRate");
  topicLeaf("lookup", "The broker serving a topic", [](const TopicOpts& x) {
    std::string p = topicPath(x.topic);
    return Call{"GET", "/lookup/v2/topic/persistent/" +
                           p.substr(std::string("/admin/v2/persistent/").size())};
  });
}

}  // namespace magnetar::admintool
