// Frame decoding for the Pulsar binary protocol and helpers to read the "entry" part of payload
// frames (SEND from producers, MESSAGE to consumers). No I/O; see README.md for the byte layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "base/buffer.h"
#include "base/status.h"
#include "protocol/constants.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::protocol {

// Receives decoded frames from FrameDecoder::feed().
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  // One complete frame. `cmd` is owned by the decoder and reused: valid only during this call
  // (copy what must outlive it). `entry` is empty for simple commands; for payload commands it
  // holds every byte after the command exactly as received (optional [0x0e02 broker entry
  // metadata], then [0x0e01][crc32c][metadataSize][metadata][payload]) in its own Buffer, so
  // storage and MESSAGE frames can share it. The magic has been checked, the checksum has not
  // (see verifyChecksum). Returning a non-OK status stops decoding; feed() returns it.
  virtual Status onFrame(const proto::BaseCommand& cmd, Buffer entry) = 0;
  // A frame's 8-byte header was read and the rest of the frame is not in the chunk being fed:
  // the decoder is about to buffer a partial frame of `frameBytes` bytes (the whole frame, size
  // field included). Called once per such frame, before any of its bytes past the header are
  // buffered, and always followed by onFrame() for it unless decoding fails or stops. Frames
  // that lie whole in one chunk are not announced. Return false to defer the frame: feed()
  // stops right after its header (see FrameDecoder::lastFeedConsumed()) and the frame continues
  // with the next feed(), without a second call. Default: true. (The broker admits the frame
  // against its publish buffer here; see docs/memory-limits.md.)
  virtual bool onPartialFrameStart(size_t frameBytes) { return true; }
};

// Incremental decoder of `[totalSize u32 BE][cmdSize u32 BE][BaseCommand][entry?]` frames from a
// byte stream fed in arbitrary chunks. Thread: one connection's loop thread; not shared.
//
// Cost per frame: one protobuf parse into a reused BaseCommand; for payload commands one
// allocation and one copy of the entry bytes (straight from the fed chunk into the entry Buffer,
// also when the frame spans several chunks). Nothing is copied for a frame that lies whole in a
// chunk except that entry.
//
// Errors (connection-fatal; the decoder stays failed and returns the same error afterwards):
// totalSize + 4 > maxFrameSize, totalSize < 4, cmdSize > totalSize - 4, a BaseCommand that does
// not parse (or lacks required fields, or has an unknown type), and a payload command whose entry
// does not start with a valid magic / sizes. All have code kCorruption except the size limit
// (kTooLarge).
class FrameDecoder {
 public:
  // maxFrameSize: bound on a whole frame including its 4-byte size field, as Pulsar's
  // LengthFieldBasedFrameDecoder(maxMessageSize + kFrameSizePadding, 0, 4, 0, 4).
  explicit FrameDecoder(size_t maxFrameSize = kDefaultMaxFrameSize);

  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

  // Consumes all `len` bytes, calling handler.onFrame() for each frame completed by them (in
  // order), unless handler.onPartialFrameStart() defers a frame: then it stops after that
  // frame's header (lastFeedConsumed() < len). Returns the first decode error or the first
  // non-OK status of the handler.
  Status feed(const uint8_t* data, size_t len, FrameHandler& handler);

  // Same with a callable: `Status f(const proto::BaseCommand&, Buffer)` or
  // `void f(const proto::BaseCommand&, Buffer)`.
  template <typename F>
    requires(!std::is_base_of_v<FrameHandler, std::remove_cvref_t<F>>)
  Status feed(const uint8_t* data, size_t len, F&& f) {
    struct Adapter final : FrameHandler {
      F& fn;
      explicit Adapter(F& g) : fn(g) {}
      Status onFrame(const proto::BaseCommand& cmd, Buffer entry) override {
        if constexpr (std::is_void_v<decltype(fn(cmd, std::move(entry)))>) {
          fn(cmd, std::move(entry));
          return Status::ok();
        } else {
          return fn(cmd, std::move(entry));
        }
      }
    } adapter(f);
    return feed(data, len, static_cast<FrameHandler&>(adapter));
  }

  // True when no partial frame is buffered (the stream is at a frame boundary).
  bool idle() const { return state_ == State::kHeader && headerFill_ == 0; }
  // Bytes of the partial frame received so far (0 when idle()).
  size_t bufferedBytes() const;
  // Bytes still missing from the partial frame whose header has been read (0 when idle() or
  // while the 8-byte header itself is incomplete). Feeding exactly this many bytes completes
  // the frame and leaves the decoder at a frame boundary.
  size_t remainingInFrame() const;
  // Frames delivered so far.
  uint64_t framesDecoded() const { return frames_; }
  // Bytes the last feed() took: its `len`, or fewer when a frame was deferred at its header (the
  // caller keeps the rest and feeds it when it lets the frame go on) or decoding failed.
  size_t lastFeedConsumed() const { return lastConsumed_; }
  // Capacity of the scratch buffer kept for commands split across chunks (at most 4 KiB once a
  // split command is done: a larger one is freed).
  size_t scratchCapacity() const { return cmdBuf_.capacity(); }
  size_t maxFrameSize() const { return maxFrameSize_; }
  // Changes the limit for frames whose header has not been read yet.
  void setMaxFrameSize(size_t n) { maxFrameSize_ = n; }
  // The sticky error (OK while healthy).
  const Status& error() const { return error_; }

 private:
  enum class State { kHeader, kCommand, kEntry };

  Status fail(Status s);
  Status onHeader(const uint8_t* h);
  Status parseCommand(const uint8_t* p, size_t n);
  // The error for a frame's totalSize below 4 or over maxFrameSize (the cold path of feedSome).
  Status failFrameSize(uint32_t total);
  // Appends a command split across reads to cmdBuf_ and parses it once whole (*complete).
  Status appendSplitCommand(const uint8_t*& p, size_t& n, bool* complete);
  Status finishFrame(FrameHandler& handler, Buffer entry);
  // feed()'s loop; advances p and n past what it took.
  Status feedSome(const uint8_t*& p, size_t& n, FrameHandler& handler);

  size_t maxFrameSize_;
  State state_ = State::kHeader;
  uint8_t header_[kFrameHeaderLen];
  size_t headerFill_ = 0;
  uint32_t totalSize_ = 0;
  uint32_t cmdSize_ = 0;
  std::string cmdBuf_;   // command bytes when the command spans chunks
  Buffer entry_;         // entry being filled when it spans chunks
  size_t entryFill_ = 0;
  proto::BaseCommand cmd_;  // reused for every frame
  uint64_t frames_ = 0;
  size_t lastConsumed_ = 0;
  Status error_;
};

// Where the parts of an entry lie (offsets from the entry's first byte).
struct EntryLayout {
  bool hasBrokerEntryMetadata = false;
  size_t brokerEntryMetadataOffset = 0;  // of the serialized BrokerEntryMetadata
  size_t brokerEntryMetadataSize = 0;
  size_t magicOffset = 0;     // of the 0x0e01 magic; entry.substr(magicOffset) is what a client
                              // that does not support broker entry metadata must get
  uint32_t checksum = 0;      // crc32c stored in the frame
  size_t checksummedOffset = 0;  // first byte covered by the checksum (the metadataSize field)
  size_t metadataOffset = 0;
  size_t metadataSize = 0;
  size_t payloadOffset = 0;
  size_t payloadSize = 0;
};

// Parses the structure of an entry (no checksum check, no protobuf parse). kCorruption when a
// magic is wrong or a size points past the end.
Result<EntryLayout> parseEntryLayout(std::string_view entry);

// Checks the entry's crc32c over [metadataSize][metadata][payload]. OK or kCorruption (wrong
// checksum or malformed entry). Not connection-fatal for SEND: Pulsar answers SEND_ERROR
// ChecksumError and keeps the connection.
Status verifyChecksum(std::string_view entry);
inline Status verifyChecksum(const Buffer& entry) { return verifyChecksum(entry.view()); }

// Parses the entry's MessageMetadata into *out. kCorruption on malformed entry or metadata.
Status parseMetadata(std::string_view entry, proto::MessageMetadata* out);
inline Status parseMetadata(const Buffer& entry, proto::MessageMetadata* out) {
  return parseMetadata(entry.view(), out);
}

// Parses the entry's BrokerEntryMetadata into *out; kNotFound when the entry has none.
Status parseBrokerEntryMetadata(std::string_view entry, proto::BrokerEntryMetadata* out);

// The payload bytes of an entry (a view into it, valid while the entry lives); kCorruption on a
// malformed entry.
Result<std::string_view> payloadOf(std::string_view entry);
inline Result<std::string_view> payloadOf(const Buffer& entry) { return payloadOf(entry.view()); }

}  // namespace magnetar::protocol
