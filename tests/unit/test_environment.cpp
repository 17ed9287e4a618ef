// support/environment.h: adding to the environment without freeing the array other threads may
// be reading (glibc's setenv frees it once it allocated it itself, as it has after any setenv).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/environment.h"

TEST_CASE("environment: add_to_environment adds a variable and leaves the old array intact") {
  // After this setenv, glibc owns the environment array: its next setenv would free it.
  REQUIRE(::setenv("KILN_TEST_ENV_FIRST", "1", 1) == 0);
  char** before = environ;
  std::vector<char*> entries;
  for (char** e = before; *e; ++e) entries.push_back(*e);

  CHECK(kiln::add_to_environment("KILN_TEST_ENV_ADDED=2"));
  CHECK(environ != before);
  REQUIRE(std::getenv("KILN_TEST_ENV_ADDED") != nullptr);
  CHECK(std::string(std::getenv("KILN_TEST_ENV_ADDED")) == "2");
  CHECK(std::string(std::getenv("KILN_TEST_ENV_FIRST")) == "1");
  // A thread that read `environ` before still walks a valid, unchanged array (freed memory
  // would have its first entries overwritten by the allocator, and ASan would report the read).
  for (size_t i = 0; i < entries.size(); ++i) CHECK(before[i] == entries[i]);
  CHECK(before[entries.size()] == nullptr);

  // Set already: left alone, as setenv(..., 0) would.
  CHECK_FALSE(kiln::add_to_environment("KILN_TEST_ENV_ADDED=3"));
  CHECK(std::string(std::getenv("KILN_TEST_ENV_ADDED")) == "2");
  // Not NAME=VALUE.
  CHECK_FALSE(kiln::add_to_environment("=x"));
  CHECK_FALSE(kiln::add_to_environment("KILN_TEST_ENV_NO_VALUE"));
  // glibc's setenv and unsetenv go on working on the array it made.
  REQUIRE(::setenv("KILN_TEST_ENV_LATER", "4", 1) == 0);
  CHECK(std::string(std::getenv("KILN_TEST_ENV_ADDED")) == "2");
  CHECK(std::string(std::getenv("KILN_TEST_ENV_LATER")) == "4");
  for (const char* name : {"KILN_TEST_ENV_FIRST", "KILN_TEST_ENV_ADDED", "KILN_TEST_ENV_LATER"}) ::unsetenv(name);
  CHECK(std::getenv("KILN_TEST_ENV_ADDED") == nullptr);
}
