#include "base/status.h"

namespace magnetar {

std::string_view statusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kIoError: return "IOError";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kBusy: return "Busy";
    case StatusCode::kNotAllowed: return "NotAllowed";
    case StatusCode::kTooLarge: return "TooLarge";
    case StatusCode::kClosed: return "Closed";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kNoSpace: return "NoSpace";
    case StatusCode::kBadVersion:
      return "BadVersion";
    case StatusCode::kFenced:
      return "Fenced";
  }
  return "Unknown";
}

std::string Status::toString() const {
  if (isOk()) return "OK";
  std::string s(statusCodeName(code()));
  s += ": ";
  s += message();
  return s;
}

}  // namespace magnetar
