#include "support/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "something other than a file";
}

std::string name_of(const std::string& path, const std::string& what) {
  return what.empty() ? "'" + path + "'" : what;
}

}  // namespace

Result<int> open_regular_file(const std::string& path, size_t* size, const std::string& what) {
  const std::string name = name_of(path, what);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("cannot open " + name + ": no such file");
    return invalid_argument("cannot open " + name + ": " + std::strerror(err));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int err = errno;
    close(fd);
    return invalid_argument("cannot read " + name + ": " + std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return invalid_argument("cannot read " + name + ": it is " + kind_of(info.st_mode) + ", not a regular file");
  }
  if (size) *size = size_t(info.st_size);
  return fd;
}

Result<std::vector<std::byte>> read_regular_file(const std::string& path, const std::string& what) {
  const std::string name = name_of(path, what);
  size_t size = 0;
  KILN_ASSIGN_OR_RETURN(int fd, open_regular_file(path, &size, what));
  std::vector<std::byte> bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    close(fd);
    return Status(ErrorCode::kOutOfMemory, "cannot read " + name + ": " + std::to_string(size) +
                                               " bytes do not fit in memory");
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return invalid_argument("cannot read " + name + ": " + (n == 0 ? "the file shrank while read" : std::strerror(err)));
    }
    done += size_t(n);
  }
  close(fd);
  return bytes;
}

Status check_regular_file(const std::string& path, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(int fd, open_regular_file(path, nullptr, what));
  close(fd);
  return Status::ok();
}

}  // namespace kiln
