#pragma once
// Builds compact JSON text with keys in the order they are written, so that the same
// values always give the same bytes (records, manifests, config files).
// Owns: escaping and number formatting. Does not own: any schema.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io {

std::string json_escape(std::string_view text);  // quoted JSON string; invalid UTF-8 bytes become U+FFFD

class JsonWriter final {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(double number);  // shortest round-trip form; non-finite becomes null
  JsonWriter& value(float number);   // shortest form that round-trips as a float; non-finite becomes null
  JsonWriter& value(bool flag);
  JsonWriter& null();
  JsonWriter& raw(std::string_view json);  // an already-serialized JSON value
  template <typename T>
  JsonWriter& array(const std::vector<T>& values) {
    begin_array();
    for (const auto& v : values) value(static_cast<int64_t>(v));
    return end_array();
  }
  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool after_key_ = false;
};

}  // namespace deepinfer::io
