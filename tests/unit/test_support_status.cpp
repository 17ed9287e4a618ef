// support/status.h: Result<T> as tests and callers use it.
#include <doctest/doctest.h>

#include <string>

#include "support/status.h"

TEST_CASE("status: Result::status() is ok on a success, so a diagnostic may be built either way") {
  kiln::Result<int> success = 7;
  REQUIRE(success.is_ok());
  CHECK(success.status().is_ok());
  CHECK(success.status().to_string() == "ok");
  CHECK(std::move(success).status().is_ok());

  kiln::Result<int> failure = kiln::invalid_argument("bad shape", {"m.graph", 3, 5});
  REQUIRE_FALSE(failure.is_ok());
  CHECK(failure.status().code() == kiln::ErrorCode::kInvalidArgument);
  CHECK(failure.status().to_string() == "m.graph:3:5: error: bad shape");
  kiln::Status moved = std::move(failure).status();
  CHECK(moved.message() == "bad shape");
}
