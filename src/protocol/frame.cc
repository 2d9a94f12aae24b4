#include "protocol/frame.h"

#include <algorithm>
#include <cstring>

#include "base/crc32c.h"
#include "protocol/byte_order.h"

namespace magnetar::protocol {

using wire::readBE16;
using wire::readBE32;

namespace {

std::string hex16(uint16_t v) {
  static const char* kDigits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 12; shift >= 0; shift -= 4) s += kDigits[(v >> shift) & 0xf];
  return s;
}

// Scratch bytes a decoder keeps between split commands.
constexpr size_t kKeptCommandCapacity = 4096;

bool isPayloadCommand(proto::BaseCommand::Type t) {
  return t == proto::BaseCommand::SEND || t == proto::BaseCommand::MESSAGE;
}

// Whether the required fields are all set. A BaseCommand carries the one sub-message its type
// names, and only that one is read: the per-message commands check just it (the whole-message
// check tests each of its 54 sub-message slots, 2-4 % of a load generator's CPU at max
// rate); any other type, rare, gets the whole check. A frame whose sub-message is absent is left
// to its handler, as before.
bool requiredFieldsSet(const proto::BaseCommand& c) {
  using T = proto::BaseCommand;
  switch (c.type()) {
    case T::SEND:
      return !c.has_send() || c.send().IsInitialized();
    case T::SEND_RECEIPT:
      return !c.has_send_receipt() || c.send_receipt().IsInitialized();
    case T::MESSAGE:
      return !c.has_message() || c.message().IsInitialized();
    case T::ACK:
      return !c.has_ack() || c.ack().IsInitialized();
    case T::FLOW:
      return !c.has_flow() || c.flow().IsInitialized();
    default:
      return c.IsInitialized();
  }
}

}  // namespace

FrameDecoder::FrameDecoder(size_t maxFrameSize) : maxFrameSize_(maxFrameSize) {}

size_t FrameDecoder::bufferedBytes() const {
  switch (state_) {
    case State::kHeader:
      return headerFill_;
    case State::kCommand:
      return kFrameHeaderLen + cmdBuf_.size();
    case State::kEntry:
      return kFrameHeaderLen + cmdSize_ + entryFill_;
  }
  return 0;
}

size_t FrameDecoder::remainingInFrame() const {
  if (state_ == State::kHeader) return 0;
  return size_t{totalSize_} + kSizeFieldLen - bufferedBytes();
}

Status FrameDecoder::fail(Status s) {
  error_ = s;
  return s;
}

Status FrameDecoder::onHeader(const uint8_t* h) {
  totalSize_ = readBE32(h);
  cmdSize_ = readBE32(h + 4);
  if (cmdSize_ > totalSize_ - kSizeFieldLen) {
    return fail(Status::corruption("frame command size " + std::to_string(cmdSize_) +
                                   " exceeds frame size " + std::to_string(totalSize_)));
  }
  state_ = State::kCommand;
  cmdBuf_.clear();
  return Status::ok();
}

Status FrameDecoder::parseCommand(const uint8_t* p, size_t n) {
  if (!cmd_.ParsePartialFromArray(p, static_cast<int>(n))) {
    return fail(Status::corruption("unparsable BaseCommand (" + std::to_string(n) + " bytes)"));
  }
  if (!cmd_.has_type()) {
    return fail(Status::corruption("BaseCommand without a known type (" + std::to_string(n) +
                                   " bytes)"));
  }
  if (!requiredFieldsSet(cmd_)) {
    return fail(Status::corruption("BaseCommand " + proto::BaseCommand::Type_Name(cmd_.type()) +
                                   " lacks required fields: " + cmd_.InitializationErrorString()));
  }
  return Status::ok();
}

Status FrameDecoder::finishFrame(FrameHandler& handler, Buffer entry) {
  state_ = State::kHeader;
  if (!entry.empty()) {
    auto layout = parseEntryLayout(entry.view());
    if (!layout) {
      return fail(Status::corruption("payload of " + proto::BaseCommand::Type_Name(cmd_.type()) +
                                     ": " + layout.status().message()));
    }
  } else if (isPayloadCommand(cmd_.type())) {
    return fail(Status::corruption(proto::BaseCommand::Type_Name(cmd_.type()) +
                                   " frame without payload"));
  }
  ++frames_;
  Status s = handler.onFrame(cmd_, std::move(entry));
  if (!s.isOk()) error_ = s;
  return s;
}

Status FrameDecoder::feed(const uint8_t* p, size_t n, FrameHandler& handler) {
  lastConsumed_ = 0;
  if (!error_.isOk()) return error_;
  const size_t len = n;
  Status s = feedSome(p, n, handler);
  lastConsumed_ = len - n;
  return s;
}

Status FrameDecoder::failFrameSize(uint32_t total) {
  if (total < kSizeFieldLen) {
    return fail(
        Status::corruption("frame size " + std::to_string(total) + " is below the minimum of 4"));
  }
  return fail(Status::tooLarge("frame of " + std::to_string(size_t{total} + 4) +
                               " bytes exceeds the limit of " + std::to_string(maxFrameSize_)));
}

Status FrameDecoder::appendSplitCommand(const uint8_t*& p, size_t& n, bool* complete) {
  size_t take = std::min<size_t>(n, cmdSize_ - cmdBuf_.size());
  cmdBuf_.append(reinterpret_cast<const char*>(p), take);
  p += take;
  n -= take;
  if (cmdBuf_.size() < cmdSize_) return Status::ok();
  *complete = true;
  Status s = parseCommand(reinterpret_cast<const uint8_t*>(cmdBuf_.data()), cmdBuf_.size());
  cmdBuf_.clear();
  // A large split command (up to maxFrameSize) would keep its capacity for the connection's
  // life; small ones keep theirs for the next.
  if (cmdBuf_.capacity() > kKeptCommandCapacity) std::string().swap(cmdBuf_);
  return s;
}

Status FrameDecoder::feedSome(const uint8_t*& p, size_t& n, FrameHandler& handler) {
  while (n > 0) {
    if (state_ == State::kHeader) {
      const uint8_t* h;
      if (headerFill_ == 0 && n >= kFrameHeaderLen) {
        h = p;
        p += kFrameHeaderLen;
        n -= kFrameHeaderLen;
      } else {
        size_t take = std::min(n, kFrameHeaderLen - headerFill_);
        std::memcpy(header_ + headerFill_, p, take);
        headerFill_ += take;
        p += take;
        n -= take;
        h = header_;
      }
      if (headerFill_ == 0 || headerFill_ >= kSizeFieldLen) {
        // totalSize is known: check it before waiting for more bytes.
        uint32_t total = readBE32(h);
        if (total < kSizeFieldLen || size_t{total} + kSizeFieldLen > maxFrameSize_) {
          return failFrameSize(total);
        }
      }
      if (headerFill_ != 0) {
        if (headerFill_ < kFrameHeaderLen) return Status::ok();  // n == 0 here
        headerFill_ = 0;
      }
      if (Status s = onHeader(h); !s.isOk()) return s;
      if (n < size_t{totalSize_} - kSizeFieldLen &&
          !handler.onPartialFrameStart(size_t{totalSize_} + kSizeFieldLen)) {
        return Status::ok();  // deferred: the caller keeps the n bytes left
      }
    }

    if (state_ == State::kCommand) {
      if (cmdBuf_.empty() && n >= cmdSize_) {
        if (Status s = parseCommand(p, cmdSize_); !s.isOk()) return s;
        p += cmdSize_;
        n -= cmdSize_;
      } else {
        bool complete = false;
        if (Status s = appendSplitCommand(p, n, &complete); !s.isOk()) return s;
        if (!complete) return Status::ok();  // n == 0 here
      }
      size_t entryLen = totalSize_ - kSizeFieldLen - cmdSize_;
      if (entryLen == 0) {
        if (Status s = finishFrame(handler, Buffer()); !s.isOk()) return s;
        continue;
      }
      if (n >= entryLen) {
        Buffer entry = Buffer::copyOf(p, entryLen);
        p += entryLen;
        n -= entryLen;
        if (Status s = finishFrame(handler, std::move(entry)); !s.isOk()) return s;
        continue;
      }
      entry_ = Buffer::allocate(entryLen);
      entryFill_ = 0;
      state_ = State::kEntry;
      if (n == 0) return Status::ok();
    }

    if (state_ == State::kEntry) {
      size_t want = entry_.size() - entryFill_;
      size_t take = std::min(n, want);
      std::memcpy(entry_.mutableData() + entryFill_, p, take);
      entryFill_ += take;
      p += take;
      n -= take;
      if (take < want) return Status::ok();  // n == 0 here
      entryFill_ = 0;
      if (Status s = finishFrame(handler, std::move(entry_)); !s.isOk()) return s;
    }
  }
  return Status::ok();
}

Result<EntryLayout> parseEntryLayout(std::string_view entry) {
  const auto* p = reinterpret_cast<const uint8_t*>(entry.data());
  const size_t size = entry.size();
  EntryLayout l;
  size_t off = 0;
  if (size >= kMagicLen && readBE16(p) == kMagicBrokerEntryMetadata) {
    if (size < kMagicLen + kSizeFieldLen) {
      return Status::corruption("truncated broker entry metadata header");
    }
    uint32_t bemSize = readBE32(p + kMagicLen);
    if (bemSize > size - kMagicLen - kSizeFieldLen) {
      return Status::corruption("broker entry metadata size " + std::to_string(bemSize) +
                                " exceeds the entry");
    }
    l.hasBrokerEntryMetadata = true;
    l.brokerEntryMetadataOffset = kMagicLen + kSizeFieldLen;
    l.brokerEntryMetadataSize = bemSize;
    off = l.brokerEntryMetadataOffset + bemSize;
  }
  if (size - off < kEntryPrefixLen) {
    return Status::corruption("entry of " + std::to_string(size - off) +
                              " bytes is shorter than magic+checksum+metadataSize");
  }
  uint16_t magic = readBE16(p + off);
  if (magic != kMagicCrc32c) {
    return Status::corruption("bad magic " + hex16(magic) + " (expected 0x0e01)");
  }
  l.magicOffset = off;
  l.checksum = readBE32(p + off + kMagicLen);
  l.checksummedOffset = off + kMagicLen + kChecksumLen;
  uint32_t mdSize = readBE32(p + l.checksummedOffset);
  l.metadataOffset = off + kEntryPrefixLen;
  if (mdSize > size - l.metadataOffset) {
    return Status::corruption("metadata size " + std::to_string(mdSize) + " exceeds the entry");
  }
  l.metadataSize = mdSize;
  l.payloadOffset = l.metadataOffset + mdSize;
  l.payloadSize = size - l.payloadOffset;
  return l;
}

Status verifyChecksum(std::string_view entry) {
  auto l = parseEntryLayout(entry);
  if (!l) return l.status();
  uint32_t actual =
      crc32c(entry.data() + l->checksummedOffset, entry.size() - l->checksummedOffset);
  if (actual != l->checksum) {
    return Status::corruption("checksum mismatch: frame says " + std::to_string(l->checksum) +
                              ", computed " + std::to_string(actual));
  }
  return Status::ok();
}

Status parseMetadata(std::string_view entry, proto::MessageMetadata* out) {
  auto l = parseEntryLayout(entry);
  if (!l) return l.status();
  if (!out->ParseFromArray(entry.data() + l->metadataOffset, static_cast<int>(l->metadataSize))) {
    return Status::corruption("unparsable MessageMetadata (" + std::to_string(l->metadataSize) +
                              " bytes)");
  }
  return Status::ok();
}

Status parseBrokerEntryMetadata(std::string_view entry, proto::BrokerEntryMetadata* out) {
  auto l = parseEntryLayout(entry);
  if (!l) return l.status();
  if (!l->hasBrokerEntryMetadata) return Status::notFound("entry has no broker entry metadata");
  if (!out->ParseFromArray(entry.data() + l->brokerEntryMetadataOffset,
                           static_cast<int>(l->brokerEntryMetadataSize))) {
    return Status::corruption("unparsable BrokerEntryMetadata");
  }
  return Status::ok();
}

Result<std::string_view> payloadOf(std::string_view entry) {
  auto l = parseEntryLayout(entry);
  if (!l) return l.status();
  return entry.substr(l->payloadOffset, l->payloadSize);
}

}  // namespace magnetar::protocol
