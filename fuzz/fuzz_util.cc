#include "fuzz_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/logging.h"

namespace magnetar::fuzz {

void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void quietLogs() {
  static bool done = false;
  if (done) return;
  done = true;
  if (getenv("MAGNETAR_FUZZ_LOG") != nullptr) {
    spdlog::set_level(spdlog::level::debug);
  } else {
    spdlog::set_level(spdlog::level::off);
  }
}

namespace {
std::string tempRoot() {
  if (const char* t = getenv("MAGNETAR_FUZZ_TMP")) return t;
  if (access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return "/tmp";
}
}  // namespace

TempDir::TempDir() {
  std::string tmpl = tempRoot() + "/magnetar-fuzz-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) fail("mkdtemp " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) fail("cannot write " + path);
}

std::vector<DiskItem> decodeDiskImage(const uint8_t* data, size_t size) {
  std::vector<DiskItem> items;
  size_t p = 0;
  while (p + 3 <= size) {
    DiskItem it;
    it.kind = data[p];
    size_t nameLen = data[p + 1] | (size_t{data[p + 2]} << 8);
    p += 3;
    if (p + nameLen + 4 > size) break;
    it.name.assign(reinterpret_cast<const char*>(data + p), nameLen);
    p += nameLen;
    size_t valueLen = 0;
    for (int i = 0; i < 4; i++) valueLen |= size_t{data[p + i]} << (8 * i);
    p += 4;
    if (valueLen > size - p) valueLen = size - p;  // a short last value keeps what is there
    it.value.assign(reinterpret_cast<const char*>(data + p), valueLen);
    p += valueLen;
    items.push_back(std::move(it));
  }
  return items;
}

std::string encodeDiskImage(const std::vector<DiskItem>& items) {
  std::string out;
  for (const auto& it : items) {
    out.push_back(static_cast<char>(it.kind));
    out.push_back(static_cast<char>(it.name.size() & 0xff));
    out.push_back(static_cast<char>((it.name.size() >> 8) & 0xff));
    out += it.name;
    for (int i = 0; i < 4; i++) out.push_back(static_cast<char>((it.value.size() >> (8 * i)) & 0xff));
    out += it.value;
  }
  return out;
}

}  // namespace magnetar::fuzz
