#include "tools/common/cli.h"

#include <charconv>
#include <cstdio>

namespace kiln::tools {
namespace {

// The help as the tools have always printed it: "usage: kiln-run [options] ARTIFACT.kiln", the
// description, then the options as "--bench=N" ("--input NAME=FILE.npy" when the value itself
// holds '='), without CLI11's "Needs:" / "Excludes:" lists (the descriptions say so).
class Formatter final : public CLI::Formatter {
 public:
  explicit Formatter(std::string usage) : usage_(std::move(usage)) {}
  std::string make_description(const CLI::App*) const override { return ""; }
  std::string make_usage(const CLI::App* app, std::string) const override {
    return usage_ + "\n" + app->get_description() + "\n";
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_positional() || opt->get_type_size() == 0 || opt->get_type_name().empty()) return "";
    const std::string& value = opt->get_type_name();
    return (value.find('=') == std::string::npos ? "=" : " ") + value;
  }

 private:
  std::string usage_;
};

// NAME=VALUE split at the first '=', when both parts are non-empty.
std::optional<std::pair<std::string, std::string>> split_assignment(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return std::nullopt;
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

}  // namespace

std::unique_ptr<CLI::App> make_app(const std::string& tool, const std::string& usage_tail,
                                   const std::string& description, const std::string& footer) {
  auto app = std::make_unique<CLI::App>(description, tool);
  app->formatter(std::make_shared<Formatter>("usage: " + tool + " " + usage_tail));
  app->get_formatter()->column_width(26);
  app->set_help_flag("-h,--help", "show this help and exit");
  app->footer(footer);
  app->allow_extras();
  return app;
}

std::optional<int> parse_command_line(CLI::App& app, const std::string& tool, int argc, char** argv) {
  auto usage_error = [&](const std::string& message) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), message.c_str());
    return 1;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  const CLI::Option* artifact = app.get_option_no_throw("artifact");
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;
    if (extra.size() > 1 && extra[0] == '-') return usage_error("unknown option '" + extra + "' (see --help)");
    return usage_error("more than one artifact given ('" +
                       (artifact && artifact->count() ? artifact->as<std::string>() : std::string()) + "' and '" +
                       extra + "')");
  }
  return std::nullopt;
}

CLI::Option* add_assignment_option(CLI::App& app, const std::string& flag,
                                   std::vector<std::pair<std::string, std::string>>& out,
                                   const std::string& value_form, const std::string& help) {
  const std::size_t eq = value_form.find('=');
  return app
      .add_option_function<std::vector<std::string>>(
          flag,
          [&out](const std::vector<std::string>& values) {
            for (const std::string& v : values) out.push_back(*split_assignment(v));
          },
          help)
      ->type_name(value_form)
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [value_form, eq](std::string& text) -> std::string {
            if (split_assignment(text)) return "";
            return "expects " + value_form + " (" + value_form.substr(0, eq) + " and " +
                   value_form.substr(eq + 1) + " both non-empty), given '" + text + "'";
          },
          ""));
}

CLI::Option* add_dim_option(CLI::App& app, std::vector<std::pair<std::string, int64_t>>& out,
                            const std::string& help) {
  auto parse_size = [](const std::string& text) -> std::optional<int64_t> {
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
    return value;
  };
  return app
      .add_option_function<std::vector<std::string>>(
          "--dim",
          [&out, parse_size](const std::vector<std::string>& values) {
            for (const std::string& v : values) {
              auto [symbol, size] = *split_assignment(v);
              out.emplace_back(symbol, *parse_size(size));
            }
          },
          help)
      ->type_name("SYMBOL=SIZE")
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [parse_size](std::string& text) -> std::string {
            std::optional<std::pair<std::string, std::string>> parts = split_assignment(text);
            if (parts && parse_size(parts->second)) return "";
            return "expects SYMBOL=SIZE with SIZE an integer >= 0, given '" + text + "'";
          },
          ""));
}

CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          return "expects an integer >= 0, given '" + text + "'";
        return "";
      },
      "");
}

CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(value >= 0))
          return "expects a number >= 0, given '" + text + "'";
        return "";
      },
      "");
}

CLI::Validator output_file_validator() {
  return CLI::Validator(
      [](std::string& text) { return text.empty() ? std::string("needs a file name, or - for stdout") : std::string(); },
      "");
}

}  // namespace kiln::tools
