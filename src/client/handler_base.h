// HandlerBase: the connect and reconnect logic producers and consumers share (pulsar-client-cpp's
// HandlerBase). Internal to src/client.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "client/backoff.h"

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
  // id: the producer or consumer id; it picks the connection slot (ClientImpl::slotFor).
  HandlerBase(const std::shared_ptr<ClientImpl>& client, std::string topic, uint64_t id);

  // What a failed connect or (re)subscribe leads to.
  enum class AfterFailure {
    kRetry,       // retriable, or connected before and not fatal: reconnect after the back-off
    kFailCreate,  // never connected, and final (not retriable, client closed, deadline passed)
    kGiveUp,      // connected before, and fatal (isFatalForReconnect) or the client closed
  };
  // Never connected: the create deadline is startConnecting()'s.
  AfterFailure afterFailure(const Status& s, bool everConnected) const;

  // Sets the create deadline (now + operationTimeout) and posts the first grabConnection() to
  // the home loop (the handler kept alive until it runs). Any thread; once, after construction.
  void startConnecting();

  // Looks the topic's connection up and calls connectionReady or connectFailed on the home loop;
  // does nothing when connecting() is false. The client closed: connectFailed(kClosed).
  void grabConnection();
  // grabConnection() after the back-off's next delay. Any thread.
  void scheduleReconnect();
  void cancelReconnect() { reconnectTimer_.cancel(); }
  void resetBackoff() { backoff_.reset(); }

  // Still waiting for a connection (takes the handler's own lock).
  virtual bool connecting() const = 0;
  virtual void connectionReady(std::shared_ptr<ClientConnection> cnx) = 0;
  virtual void connectFailed(const Status& s) = 0;
  virtual std::weak_ptr<HandlerBase> weakHandler() = 0;

  const std::shared_ptr<ClientImpl> client_;
  const std::string topic_;
  const uint64_t handlerId_;
  const int slot_;

 private:
  std::chrono::steady_clock::time_point createDeadline_;  // set before the first connect
  boost::asio::steady_timer reconnectTimer_;  // home loop
  Backoff backoff_;                           // home loop
};

}  // namespace magnetar::client
