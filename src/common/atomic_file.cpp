#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace pith {

namespace fs = std::filesystem;

void write_file_atomically(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      fmt::format("{}.{}.{}.tmp", path, static_cast<long>(getpid()), counter.fetch_add(1));
  auto fail_with = [&](const char* step, int err) {
    ::unlink(tmp.c_str());
    fail("{}: cannot {} ({})", path, step, std::strerror(err));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create {} ({})", path, tmp, std::strerror(errno));
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail_with("write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    fail_with("flush to disk", err);
  }
  if (::close(fd) != 0) fail_with("close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail_with("rename into place", errno);
}

size_t remove_temporaries(const std::string& dir) {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    if (f.path().extension() != ".tmp") continue;
    if (fs::remove(f.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace pith
