// Status and Result<T>: the error type of every fallible call (LevelDB style, cheap on success).
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace magnetar {

// Error categories. Mapped to the protocol's ServerError in one place (protocol/server_error.h).
// Never renumber: values appear in logs and metrics.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kAlreadyExists = 3,
  kIoError = 4,
  kCorruption = 5,
  kBusy = 6,  // e.g. ProducerBusy / ConsumerBusy
  kNotAllowed = 7,
  kTooLarge = 8,
  kClosed = 9,
  kTimeout = 10,
  kUnsupported = 11,
  kInternal = 12,
  kNoSpace = 13,
  kBadVersion = 14,  // a compare-and-set found another version (metadata stores)
  kFenced = 15,      // another owner took the resource over (Pulsar's ManagedLedgerFencedException)
};

// Success or an error code plus message. Thread: value type, no sharing.
class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(StatusCode code, std::string msg) { return Status(code, std::move(msg)); }
  static Status invalidArgument(std::string m) { return error(StatusCode::kInvalidArgument, std::move(m)); }
  static Status notFound(std::string m) { return error(StatusCode::kNotFound, std::move(m)); }
  static Status alreadyExists(std::string m) { return error(StatusCode::kAlreadyExists, std::move(m)); }
  static Status ioError(std::string m) { return error(StatusCode::kIoError, std::move(m)); }
  static Status corruption(std::string m) { return error(StatusCode::kCorruption, std::move(m)); }
  static Status busy(std::string m) { return error(StatusCode::kBusy, std::move(m)); }
  static Status notAllowed(std::string m) { return error(StatusCode::kNotAllowed, std::move(m)); }
  static Status tooLarge(std::string m) { return error(StatusCode::kTooLarge, std::move(m)); }
  static Status closed(std::string m) { return error(StatusCode::kClosed, std::move(m)); }
  static Status unsupported(std::string m) { return error(StatusCode::kUnsupported, std::move(m)); }
  static Status internal(std::string m) { return error(StatusCode::kInternal, std::move(m)); }
  static Status noSpace(std::string m) { return error(StatusCode::kNoSpace, std::move(m)); }
  static Status badVersion(std::string m) { return error(StatusCode::kBadVersion, std::move(m)); }
  static Status fenced(std::string m) { return error(StatusCode::kFenced, std::move(m)); }

  bool isOk() const { return rep_ == nullptr; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const {
    static const std::string kEmpty;
    return rep_ ? rep_->msg : kEmpty;
  }
  std::string toString() const;

 private:
  struct Rep {
    StatusCode code;
    std::string msg;
  };
  Status(StatusCode c, std::string m) : rep_(std::make_shared<Rep>(Rep{c, std::move(m)})) {}
  std::shared_ptr<const Rep> rep_;  // null on success
};

// A value or an error Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).isOk()); }  // NOLINT
  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Status status() const { return isOk() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

std::string_view statusCodeName(StatusCode c);

}  // namespace magnetar
