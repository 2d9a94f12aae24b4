// Helpers shared by the fuzz targets and the seed generator: temporary directories, failing with
// a message, and the container format of fuzz_journal inputs. Not part of the product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace magnetar::fuzz {

// Reports a broken invariant and aborts, so libFuzzer saves the input as a crash.
[[noreturn]] void fail(const std::string& what);
inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// Silences the broker's logging (spdlog) unless MAGNETAR_FUZZ_LOG is set. Idempotent.
void quietLogs();

// A fresh directory under $MAGNETAR_FUZZ_TMP, /dev/shm or /tmp; removed with its contents when
// destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `data` to `path` (created or truncated); aborts on failure (the fuzz machine's fault).
void writeFile(const std::string& path, std::string_view data);

// fuzz_journal's input: a sequence of items, each
//   [u8 kind][u16 LE name length][name][u32 LE value length][value]
// kind 0: a metadata-store record (name = key, value = value); kind 1: a journal segment file
// (name = 8-byte LE segment id, value = the file's bytes). A truncated item ends the input.
struct DiskItem {
  uint8_t kind = 0;
  std::string name;
  std::string value;
};
inline constexpr uint8_t kItemMetadata = 0;
inline constexpr uint8_t kItemSegment = 1;
std::vector<DiskItem> decodeDiskImage(const uint8_t* data, size_t size);
std::string encodeDiskImage(const std::vector<DiskItem>& items);

}  // namespace magnetar::fuzz
