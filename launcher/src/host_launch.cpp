#include "host_launch.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "record.h"

namespace tnt::launcher::detail {
namespace {

constexpr const char* kWhat = "host launch description";

void add_variables(RecordWriter& w, std::string_view key, const Environment& env) {
  for (const auto& [name, value] : env) w.add(key, name + "=" + value);
}

Environment variables(const Record& r, std::string_view key) {
  Environment env;
  for (const auto& item : r.all(key)) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, std::min(eq, item.size()));
    const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                       std::all_of(name.begin(), name.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (eq == std::string::npos || !valid) {
      throw r.error(key, "'" + item.substr(0, 40) + "' is not NAME=VALUE with a valid variable name");
    }
    env.emplace_back(name, item.substr(eq + 1));
  }
  return env;
}

const char* binding_name(CoreBinding binding) {
  switch (binding) {
    case CoreBinding::automatic: return "auto";
    case CoreBinding::core: return "core";
    case CoreBinding::none: return "none";
  }
  return "auto";
}

}  // namespace

std::string serialize(const HostLaunch& h) {
  RecordWriter w;
  w.add("host", h.host).add("job_id", h.job_id).add("cwd", h.cwd);
  for (const auto& a : h.program) w.add("arg", a);
  add_variables(w, "env", h.job_env);
  add_variables(w, "export", h.exports);
  w.add("first_rank", h.first_rank).add("n_ranks", h.n_ranks).add("pin", h.pin).add("pin_memory", h.pin_memory);
  w.add("core_binding", binding_name(h.core_binding));
  w.add("numa_topology", h.numa_topology).add("log_level", h.log_level);
  w.add("stop_grace_ms", static_cast<long long>(h.stop_grace_s * 1000));
  return w.finish();
}

HostLaunch deserialize_host_launch(const std::string& text) {
  const Record r = Record::parse(text, kWhat,
                                 {"host", "job_id", "cwd", "arg", "env", "export", "first_rank", "n_ranks", "pin",
                                  "pin_memory", "core_binding", "numa_topology", "log_level", "stop_grace_ms"});
  HostLaunch h;
  h.host = r.text("host");
  h.job_id = r.text("job_id");
  h.cwd = r.text("cwd");
  h.program = r.all("arg");
  if (h.program.empty()) throw RecordError(std::string(kWhat) + ": no program ('arg' line)");
  h.job_env = variables(r, "env");
  h.exports = variables(r, "export");
  h.first_rank = static_cast<int>(r.integer("first_rank", 0, INT_MAX));
  h.n_ranks = static_cast<int>(r.integer("n_ranks", 1, kMaxRanksPerHost));
  h.pin = r.flag("pin");
  h.pin_memory = r.flag("pin_memory");
  const std::string binding = r.text("core_binding");
  if (binding == "auto") {
    h.core_binding = CoreBinding::automatic;
  } else if (binding == "core") {
    h.core_binding = CoreBinding::core;
  } else if (binding == "none") {
    h.core_binding = CoreBinding::none;
  } else {
    throw r.error("core_binding", "core_binding '" + binding.substr(0, 40) + "' is not auto, core or none");
  }
  h.numa_topology = r.text("numa_topology");
  h.log_level = r.text("log_level");
  if (h.log_level != "INFO" && h.log_level != "WARNING" && h.log_level != "DEBUG" && h.log_level != "ERROR") {
    throw r.error("log_level", "log_level '" + h.log_level.substr(0, 40) + "' is not INFO, WARNING, DEBUG or ERROR");
  }
  h.stop_grace_s = static_cast<double>(r.integer("stop_grace_ms", 0, 600'000)) / 1000.0;
  return h;
}

}  // namespace tnt::launcher::detail
