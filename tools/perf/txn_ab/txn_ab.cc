// txn-ab: consume-transform-produce with and without transactions, on one client (not yet a
// magnetar-perf scenario; see README.md). Usage: txn-ab URL txn|plain N TOTAL BROKER_PID
// Produces TOTAL keyed messages (100 keys) to a fresh input topic, then moves them to an output
// topic in groups of N: receive, send "out-<payload>", ack; per group one transaction (txn:
// sends and acks in it, then commit) or a producer flush (plain). Prints the rate, the CPU seconds
// per 1M messages of this process and of BROKER_PID (/proc), and the output check: each message
// exactly once, in order per key.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "client/client.h"

using namespace magnetar;
using namespace magnetar::client;
using namespace std::chrono_literals;

static double cpuSelf() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double cpuOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(f, s);
  auto p = s.rfind(')');
  std::string rest = s.substr(p + 2);
  long v[20];
  char st;
  sscanf(rest.c_str(), "%c %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &st, &v[0], &v[1],
         &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]);
  return (v[10] + v[11]) / 100.0;
}

// TOTAL messages, payload "<i>", key "k<i % 100>". False on a failure.
bool produceInput(Client& client, const std::string& topic, int total) {
  ProducerConfig pc;
  pc.blockIfQueueFull = true;
  auto p = client.createProducer(topic, pc);
  if (!p) return false;
  std::atomic<int> failed{0};
  for (int i = 0; i < total; ++i) {
    std::string payload = std::to_string(i);
    std::string key = "k" + std::to_string(i % 100);
    p->sendAsync(OutgoingMessage{.payload = payload, .key = key},
                 [&failed](const Status& s, const MessageId&) {
                   if (!s.isOk()) ++failed;
                 });
  }
  return p->flush().isOk() && failed.load() == 0 && p->close().isOk();
}

// Moves up to n messages from app to out in one transaction (txnMode) or one flush; returns how
// many, or -1 on a failure (printed).
int moveGroup(Client& client, Consumer& app, Producer& out, bool txnMode, int n) {
  Transaction txn;
  if (txnMode) {
    auto t = client.newTransaction(60s);
    if (!t) return fprintf(stderr, "newTransaction: %s\n", t.status().toString().c_str()), -1;
    txn = *t;
  }
  for (int k = 0; k < n; ++k) {
    auto m = app.receive(10s);
    if (!m) return fprintf(stderr, "receive: %s\n", m.status().toString().c_str()), -1;
    std::string payload = "out-" + m->payloadString();
    OutgoingMessage om{.payload = payload, .key = m->key()};
    if (txnMode) om.txn = &txn;
    out.sendAsync(om, [](const Status&, const MessageId&) {});
    if (!txnMode) {
      (void)app.acknowledge(*m);
      continue;
    }
    app.acknowledgeAsync(m->messageId(), txn, [](const Status& s) {
      if (!s.isOk()) fprintf(stderr, "ack: %s\n", s.toString().c_str());
    });
  }
  Status s = txnMode ? txn.commit() : out.flush();
  if (!s.isOk()) return fprintf(stderr, "commit/flush: %s\n", s.toString().c_str()), -1;
  return n;
}

struct Check {
  int unique = 0, duplicates = 0, disorder = 0;
};

// Reads the output: each of the total messages once, in order per key.
Check verifyOutput(Consumer& verify, int total) {
  Check c;
  std::map<std::string, int> lastPerKey;
  std::vector<bool> seen(static_cast<size_t>(total));
  while (c.unique + c.duplicates < total) {
    auto m = verify.receive(10s);
    if (!m) break;
    int v = std::stoi(m->payloadString().substr(4));
    if (seen[v]) {
      ++c.duplicates;
      continue;
    }
    seen[v] = true;
    ++c.unique;
    auto [it, fresh] = lastPerKey.emplace(m->key(), v);
    if (!fresh && v < it->second) ++c.disorder;
    it->second = v;
  }
  return c;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: txn-ab URL txn|plain N TOTAL BROKER_PID\n");
    return 2;
  }
  bool txnMode = std::string(argv[2]) == "txn";
  int n = std::stoi(argv[3]);
  int total = std::stoi(argv[4]);
  int brokerPid = std::stoi(argv[5]);
  std::string suffix = std::to_string(nowMs());
  std::string in = "persistent://public/default/ab-in-" + suffix;
  std::string out = "persistent://public/default/ab-out-" + suffix;
  ClientConfig cc;
  cc.enableTransaction = true;
  Client client(argv[1], cc);
  ConsumerConfig vc;
  vc.initialPosition = InitialPosition::kEarliest;
  auto verify = client.subscribe(out, "verify", vc);
  ConsumerConfig ac;
  ac.subscriptionType = SubscriptionType::kShared;
  ac.initialPosition = InitialPosition::kEarliest;
  auto app = client.subscribe(in, "app", ac);
  ProducerConfig opc;
  opc.blockIfQueueFull = true;
  auto outP = client.createProducer(out, opc);
  if (!verify || !app || !outP || !produceInput(client, in, total)) {
    fprintf(stderr, "set-up failed\n");
    return 1;
  }
  double c0 = cpuSelf(), b0 = cpuOf(brokerPid);
  auto t0 = std::chrono::steady_clock::now();
  for (int done = 0; done < total;) {
    int k = moveGroup(client, *app, *outP, txnMode, std::min(n, total - done));
    if (k < 0) return 1;
    done += k;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpuApp = cpuSelf() - c0, cpuBroker = cpuOf(brokerPid) - b0;
  Check c = verifyOutput(*verify, total);
  printf(
      "mode=%s N=%d messages=%d secs=%.2f msg/s=%.0f appCPU/1M=%.1fs brokerCPU/1M=%.1fs "
      "verified=%d dup=%d disorder=%d\n",
      argv[2], n, total, secs, total / secs, cpuApp * 1e6 / total, cpuBroker * 1e6 / total,
      c.unique, c.duplicates, c.disorder);
  (void)client.close();
  return c.unique == total && c.duplicates == 0 && c.disorder == 0 ? 0 : 1;
}
