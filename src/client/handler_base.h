// HandlerBase: the connect and reconnect logic producers and consumers share (pulsar-client-cpp's
// HandlerBase). Internal to src/client.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "client/backoff.h"
#include "client/message.h"

namespace magnetar::client {

class ClientImpl;
class ClientConnection;

// Finds the topic's connection, retries failures after a back-off, and decides when to give up.
// Thread: constructed anywhere; every other method on the home loop of the handler's connection
// slot, except scheduleReconnect (any thread).
class HandlerBase {
 public:
  virtual ~HandlerBase() = default;
  HandlerBase(const HandlerBase&) = delete;
  HandlerBase& operator=(const HandlerBase&) = delete;

 protected:
  // id: the producer or consumer id; it picks the connection slot (ClientImpl::slotFor). kind:
  // "producer" or "consumer", for the logs.
  HandlerBase(const std::shared_ptr<ClientImpl>& client, std::string topic, uint64_t id,
              const char* kind);

  enum class State { kConnecting, kReady, kClosing, kClosed, kFailed };

  // What a failed connect or (re)subscribe leads to.
  enum class AfterFailure {
    kRetry,       // retriable, or connected before and not fatal: reconnect after the back-off
    kFailCreate,  // never connected, and final (not retriable, client closed, deadline passed)
    kGiveUp,      // connected before, and fatal (isFatalForReconnect) or the client closed
  };
  // Never connected: the create deadline is startConnecting()'s.
  AfterFailure afterFailure(const Status& s, bool everConnected) const;

  // Keeps createCb for the end of the first connect (OK once registered with the broker, else the
  // final failure), sets the create deadline (now + operationTimeout) and posts the first
  // grabConnection() to the home loop (the handler kept alive until it runs). Any thread; once,
  // after construction.
  void startConnecting(StatusCallback createCb);

  // Looks the topic's connection up and calls connectionReady or connectFailed on the home loop;
  // does nothing when connecting() is false. The client closed: connectFailed(kClosed).
  void grabConnection();
  // grabConnection() after the back-off's next delay. Any thread.
  void scheduleReconnect();
  void cancelReconnect() { reconnectTimer_.cancel(); }
  void resetBackoff() { backoff_.reset(); }

  // Still waiting for a connection (takes mu_).
  bool connecting() const;
  // A connect or (re)registration failed while connecting: retried after the back-off, or the
  // handler fails (afterFailure()); the create callback gets a final failure.
  void connectFailed(const Status& s);
  // Under mu_, when connection cnx went away: false when it is not this handler's; else it is
  // dropped and a ready handler is connecting again (*reconnect: the caller reconnects).
  bool dropConnectionLocked(ClientConnection* cnx, bool* reconnect) REQUIRES(mu_);

  // The broker's answer to the registration (PRODUCER, SUBSCRIBE) sent on cnx: a failure s
  // unregisters the handler there and goes to connectFailed(s) (true); OK: false.
  bool registrationFailed(ClientConnection& cnx, const Status& s);
  // Under mu_, the registration on cnx succeeded: false when the handler stopped connecting
  // meanwhile (then undone on the broker); else it is kReady on cnx, everConnected_, and the
  // create callback moves to *createCb.
  bool readyLocked(const std::shared_ptr<ClientConnection>& cnx, StatusCallback* createCb)
      REQUIRES(mu_);

  virtual void connectionReady(std::shared_ptr<ClientConnection> cnx) = 0;
  // Removes the handler's id from cnx; closeOnBroker: and sends CLOSE_PRODUCER/CLOSE_CONSUMER.
  virtual void unregisterFrom(ClientConnection& cnx, bool closeOnBroker) = 0;
  // Reconnecting failed for good (state_ is kFailed): what fails with the handler, under mu_;
  // the returned work (may be empty) runs once mu_ is released.
  virtual std::function<void()> gaveUpLocked(const Status& s) REQUIRES(mu_) = 0;
  virtual std::weak_ptr<HandlerBase> weakHandler() = 0;

  const std::shared_ptr<ClientImpl> client_;
  const std::string topic_;
  const uint64_t handlerId_;
  const int slot_;
  const char* const kind_;

  mutable Mutex mu_;
  State state_ GUARDED_BY(mu_) = State::kConnecting;
  std::shared_ptr<ClientConnection> cnx_ GUARDED_BY(mu_);
  bool everConnected_ GUARDED_BY(mu_) = false;
  StatusCallback createCb_ GUARDED_BY(mu_);

 private:
  std::chrono::steady_clock::time_point createDeadline_;  // set before the first connect
  boost::asio::steady_timer reconnectTimer_;  // home loop
  Backoff backoff_;                           // home loop
};

}  // namespace magnetar::client
