#include "store/sqlite/codec.h"

#include "model/ddb_text.h"
#include "outbox/ddb_json.h"

namespace outbox::sqlite_store {

// Straight to text (the same bytes as ddbjson::Encode(item).dump()).
std::string EncodeItem(const Item& item) { return ddbjson::EncodeText(item); }

absl::StatusOr<Item> DecodeItem(std::string_view text) {
  // Stored items are the codec's own output: the direct decoder takes them; anything it
  // declines goes through the strict codec, which words the error.
  if (auto fast = ddbjson::TryDecodeItemText(text)) return *std::move(fast);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("stored item is not valid JSON");
  auto item = ddbjson::DecodeItem(j);
  if (!item.ok())
    return absl::DataLossError(std::string("stored item is invalid: ") +
                               std::string(item.status().message()));
  return item;
}

std::string KeyBlob(const Value& v) {
  switch (v.type()) {
    case Type::S:
      return v.s();
    case Type::B:
      return v.b();
    case Type::N:
      return v.n().SortKey();
    default:
      return std::string();
  }
}

namespace {
nlohmann::json KeyAttrJson(const KeyAttribute& k) {
  return {{"name", k.name}, {"type", std::string(TypeName(k.type))}};
}
absl::StatusOr<KeyAttribute> KeyAttrFromJson(const nlohmann::json& j) {
  KeyAttribute k;
  if (!j.is_object() || !j.contains("name") || !j.contains("type")) {
    return absl::DataLossError("stored table spec: bad key attribute");
  }
  k.name = j["name"].get<std::string>();
  if (!ParseTypeName(j["type"].get<std::string>(), &k.type)) {
    return absl::DataLossError("stored table spec: bad key type");
  }
  return k;
}

nlohmann::json ThroughputJson(const ProvisionedThroughput& t) {
  return {{"read", t.read_capacity_units}, {"write", t.write_capacity_units}};
}
ProvisionedThroughput ThroughputFromJson(const nlohmann::json& j) {
  return {j.at("read").get<int64_t>(), j.at("write").get<int64_t>()};
}
}  // namespace

nlohmann::json SpecToJson(const TableSpec& spec) {
  nlohmann::json j = {{"name", spec.name},
                      {"hash", KeyAttrJson(spec.hash_key)},
                      {"stream", spec.stream_enabled},
                      {"view", static_cast<int>(spec.stream_view_type)}};
  if (spec.range_key) j["range"] = KeyAttrJson(*spec.range_key);
  if (spec.ttl_attribute) j["ttl"] = *spec.ttl_attribute;
  if (spec.provisioned) j["provisioned"] = ThroughputJson(*spec.provisioned);
  nlohmann::json gsis = nlohmann::json::array();
  for (const auto& g : spec.global_secondary_indexes) {
    nlohmann::json gj = {{"name", g.name},
                         {"hash", KeyAttrJson(g.hash_key)},
                         {"projection", static_cast<int>(g.projection)},
                         {"include", g.non_key_attributes}};
    if (g.range_key) gj["range"] = KeyAttrJson(*g.range_key);
    if (g.provisioned) gj["provisioned"] = ThroughputJson(*g.provisioned);
    gsis.push_back(std::move(gj));
  }
  j["gsis"] = std::move(gsis);
  return j;
}

absl::StatusOr<TableSpec> SpecFromJson(const nlohmann::json& j) {
  try {
    TableSpec spec;
    spec.name = j.at("name").get<std::string>();
    auto h = KeyAttrFromJson(j.at("hash"));
    if (!h.ok()) return h.status();
    spec.hash_key = *h;
    if (j.contains("range")) {
      auto r = KeyAttrFromJson(j["range"]);
      if (!r.ok()) return r.status();
      spec.range_key = *r;
    }
    spec.stream_enabled = j.at("stream").get<bool>();
    spec.stream_view_type = static_cast<StreamViewType>(j.at("view").get<int>());
    if (j.contains("ttl")) spec.ttl_attribute = j["ttl"].get<std::string>();
    // Absent in files written before billing modes were kept: on-demand, as they were described.
    if (j.contains("provisioned")) spec.provisioned = ThroughputFromJson(j["provisioned"]);
    for (const auto& gj : j.at("gsis")) {
      GlobalSecondaryIndex g;
      g.name = gj.at("name").get<std::string>();
      auto gh = KeyAttrFromJson(gj.at("hash"));
      if (!gh.ok()) return gh.status();
      g.hash_key = *gh;
      if (gj.contains("range")) {
        auto gr = KeyAttrFromJson(gj["range"]);
        if (!gr.ok()) return gr.status();
        g.range_key = *gr;
      }
      g.projection = static_cast<ProjectionType>(gj.at("projection").get<int>());
      g.non_key_attributes = gj.at("include").get<std::vector<std::string>>();
      if (gj.contains("provisioned")) g.provisioned = ThroughputFromJson(gj["provisioned"]);
      spec.global_secondary_indexes.push_back(std::move(g));
    }
    return spec;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(std::string("stored table spec is invalid: ") + e.what());
  }
}

std::string PrefixSuccessor(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last != 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

}  // namespace outbox::sqlite_store
