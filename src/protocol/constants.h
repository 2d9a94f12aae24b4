// Protocol constants, each with where it comes from in Pulsar.
#pragma once

#include <cstddef>
#include <cstdint>

namespace magnetar::protocol {

// Highest protocol version we speak (PulsarApi.proto ProtocolVersion v21). The broker answers
// CONNECT with min(client's version, this).
inline constexpr int32_t kMaxProtocolVersion = 21;

// Pulsar's Commands.DEFAULT_MAX_MESSAGE_SIZE (broker `maxMessageSize` default): 5 MiB.
inline constexpr uint32_t kDefaultMaxMessageSize = 5 * 1024 * 1024;

// Pulsar's Commands.MESSAGE_SIZE_FRAME_PADDING: room for command and metadata on top of
// maxMessageSize when bounding a frame. 10 KiB.
inline constexpr uint32_t kFrameSizePadding = 10 * 1024;

// Largest frame (size field included) accepted by default: maxMessageSize + padding, as Pulsar's
// broker and clients configure their LengthFieldBasedFrameDecoder.
inline constexpr uint32_t kDefaultMaxFrameSize = kDefaultMaxMessageSize + kFrameSizePadding;

// Magic numbers that open the parts of a payload frame after the command (Pulsar's
// Commands.magicCrc32c and Commands.magicBrokerEntryMetadata). Big-endian u16 on the wire.
inline constexpr uint16_t kMagicCrc32c = 0x0e01;
inline constexpr uint16_t kMagicBrokerEntryMetadata = 0x0e02;

// Fixed field sizes of the frame layout (see README.md).
inline constexpr size_t kSizeFieldLen = 4;     // totalSize, cmdSize, metadataSize, bem size
inline constexpr size_t kMagicLen = 2;
inline constexpr size_t kChecksumLen = 4;
inline constexpr size_t kFrameHeaderLen = 8;   // [totalSize][cmdSize]
// [magic 0x0e01][crc32c][metadataSize]: smallest valid entry prefix.
inline constexpr size_t kEntryPrefixLen = kMagicLen + kChecksumLen + kSizeFieldLen;

}  // namespace magnetar::protocol
