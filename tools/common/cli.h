// Command lines of kiln-run and kiln-bench, parsed with CLI11: what the two tools share.
//
// Both accept `--opt=V` and `--opt V`, options before or after the artifact, and repeatable
// NAME=VALUE options (--input, --dim, --env). A usage error is one line on stderr,
// "<tool>: error: <what>", and exit status 1; --help prints the help on stdout and exits 0.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tools {

// An App whose help reads "usage: <tool> <usage_tail>", then `description`, then the options
// (descriptions may hold '\n' to wrap; continuation lines are indented), then `footer`.
// Unknown options are collected, not thrown, so that parse_command_line reports them as
// "unknown option '--x' (see --help)".
std::unique_ptr<CLI::App> make_app(const std::string& tool, const std::string& usage_tail,
                                   const std::string& description, const std::string& footer);

// Parses argv into the options registered on `app`. Returns the exit status when the tool must
// stop here: 0 after printing --help, 1 after printing a usage error; nullopt to go on. An
// argument left over is an unknown option, or a second value of the positional option named
// "artifact" ("more than one artifact given").
std::optional<int> parse_command_line(CLI::App& app, const std::string& tool, int argc, char** argv);

// A repeatable NAME=VALUE option (both parts non-empty) appended to `out` in command-line order;
// `value_form` names the value in the help and in errors ("FILE.npy").
CLI::Option* add_assignment_option(CLI::App& app, const std::string& flag,
                                   std::vector<std::pair<std::string, std::string>>& out,
                                   const std::string& value_form, const std::string& help);
// The same for SYMBOL=SIZE (--dim), SIZE a non-negative integer.
CLI::Option* add_dim_option(CLI::App& app, std::vector<std::pair<std::string, int64_t>>& out,
                            const std::string& help);

// Validators for options that must be >= 0, with a plain message (CLI11 would accept "-3" for
// an unsigned, and its own range check prints the type's limits).
CLI::Validator non_negative_integer();
CLI::Validator non_negative_number();

// A validator for file arguments that may also be "-" (stdout): the value must be non-empty.
CLI::Validator output_file_validator();

}  // namespace kiln::tools
