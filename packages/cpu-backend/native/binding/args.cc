#include "args.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace embedstack {

namespace {

const napi_type_tag kTableTag = {0x656d626564737461ULL, 0x636b2d7461626c65ULL};  // "embedstack-table"

const char* typedArrayName(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array:
      return "Int8Array";
    case napi_uint8_array:
      return "Uint8Array";
    case napi_uint8_clamped_array:
      return "Uint8ClampedArray";
    case napi_int16_array:
      return "Int16Array";
    case napi_uint16_array:
      return "Uint16Array";
    case napi_int32_array:
      return "Int32Array";
    case napi_uint32_array:
      return "Uint32Array";
    case napi_float32_array:
      return "Float32Array";
    case napi_float64_array:
      return "Float64Array";
    case napi_bigint64_array:
      return "BigInt64Array";
    case napi_biguint64_array:
      return "BigUint64Array";
    default:
      return "TypedArray";
  }
}

std::string formatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e21) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  return buf;
}

struct RawTyped {
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
};

RawTyped typedInfo(const Napi::Value& v) {
  RawTyped r{};
  napi_value ab;
  size_t offset;
  napi_status s = napi_get_typedarray_info(v.Env(), v, &r.type, &r.length, &r.data, &ab, &offset);
  ES_CHECK(s == napi_ok, kInvalidType, "Expected a typed array but could not read it");
  if (r.data == nullptr) r.length = 0;  // detached buffer
  return r;
}

Napi::Value argAt(const Napi::CallbackInfo& info, size_t i) {
  return i < info.Length() ? info[i] : info.Env().Undefined();
}

template <class T>
TypedArg<T> typedOf(const Napi::Value& v, const char* name, napi_typedarray_type type, bool nullable) {
  TypedArg<T> a;
  if (nullable && (v.IsUndefined() || v.IsNull())) return a;
  ES_CHECK(v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == type, kInvalidType,
           "Expected " << name << " to be a " << typedArrayName(type) << (nullable ? " or null" : "")
                       << " but received " << describe(v));
  RawTyped r = typedInfo(v);
  a.data = static_cast<const T*>(r.data);
  a.length = r.length;
  a.present = true;
  a.value = v;
  return a;
}

template <class T>
TypedArg<T> typedArg(const Napi::CallbackInfo& info, size_t i, const char* name, napi_typedarray_type type,
                     bool nullable) {
  return typedOf<T>(argAt(info, i), name, type, nullable);
}

}  // namespace

std::string describe(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsNumber()) return formatNumber(v.As<Napi::Number>().DoubleValue());
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? "true" : "false";
  if (v.IsBigInt()) {
    bool lossless;
    return std::to_string(v.As<Napi::BigInt>().Int64Value(&lossless)) + "n";
  }
  if (v.IsString()) {
    std::string s = v.As<Napi::String>().Utf8Value();
    if (s.size() > 40) s = s.substr(0, 40) + "...";
    return "\"" + s + "\"";
  }
  if (v.IsTypedArray()) {
    RawTyped r = typedInfo(v);
    return std::string(typedArrayName(r.type)) + "(" + std::to_string(r.length) + ")";
  }
  if (v.IsArrayBuffer()) return "ArrayBuffer(" + std::to_string(v.As<Napi::ArrayBuffer>().ByteLength()) + ")";
  if (v.IsArray()) return "array of length " + std::to_string(v.As<Napi::Array>().Length());
  if (v.IsFunction()) return "function";
  if (v.IsExternal()) return "External";
  if (v.IsSymbol()) return "symbol";
  return "object";
}

void tagHandle(const Napi::External<TableHolder>& handle) {
  handle.TypeTag(&kTableTag);
}

TableHolder* holderOf(const Napi::Value& v, const char* name) {
  ES_CHECK(v.IsExternal() && v.As<Napi::External<TableHolder>>().CheckTypeTag(&kTableTag), kInvalidType,
           "Expected " << name << " to be a table handle returned by createTable but received " << describe(v));
  TableHolder* h = v.As<Napi::External<TableHolder>>().Data();
  ES_CHECK(h != nullptr, kInvalidType,
           "Expected " << name << " to be a table handle returned by createTable but received " << describe(v));
  return h;
}

TableHolder* holderArg(const Napi::CallbackInfo& info, size_t i) {
  return holderOf(argAt(info, i), "table");
}

std::shared_ptr<Table> tableOf(const Napi::Value& v, const char* name, TableHolder** holder) {
  TableHolder* h = holderOf(v, name);
  ES_CHECK(h->table != nullptr && !h->table->disposed(), kDisposed,
           "Expected " << name << " to be a live table but it was disposed");
  if (holder) *holder = h;
  return h->table;
}

std::shared_ptr<Table> tableArg(const Napi::CallbackInfo& info, size_t i, TableHolder** holder) {
  return tableOf(argAt(info, i), "table", holder);
}

TypedArg<float> floatArg(const Napi::CallbackInfo& info, size_t i, const char* name, bool nullable) {
  return typedArg<float>(info, i, name, napi_float32_array, nullable);
}
TypedArg<float> floatOf(const Napi::Value& v, const char* name) {
  return typedOf<float>(v, name, napi_float32_array, false);
}
TypedArg<uint8_t> uint8Arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<uint8_t>(info, i, name, napi_uint8_array, false);
}
TypedArg<int32_t> int32Arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<int32_t>(info, i, name, napi_int32_array, false);
}
TypedArg<uint32_t> uint32Arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<uint32_t>(info, i, name, napi_uint32_array, false);
}

TypedArg<double> float64Arg(const Napi::CallbackInfo& info, size_t i, const char* name, size_t expectedLength) {
  TypedArg<double> a = typedArg<double>(info, i, name, napi_float64_array, false);
  checkLength(a.length, expectedLength, name, "numbers");
  return a;
}

TypedArg<double> float64ArrayArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<double>(info, i, name, napi_float64_array, false);
}

TypedArg<uint64_t> scoresArg(const Napi::CallbackInfo& info, size_t i, size_t n) {
  TypedArg<uint64_t> a = typedArg<uint64_t>(info, i, "scores", napi_biguint64_array, true);
  if (a.present) checkLength(a.length, n, "scores", "scores (one per key)");
  return a;
}

void KeysArg::widen() {
  if (narrow == nullptr) return;
  widened.assign(narrow, narrow + n);
  data = widened.data();
  narrow = nullptr;
}

KeysArg keysArg(const Napi::CallbackInfo& info, size_t i, const TableHolder& holder, const char* name, bool keepInt32) {
  KeysArg k;
  if (holder.int32Keys) {
    TypedArg<int32_t> a = typedArg<int32_t>(info, i, name, napi_int32_array, false);
    k.narrow = a.data;
    k.n = a.length;
    k.value = a.value;
    if (!keepInt32) k.widen();
  } else {
    TypedArg<int64_t> a = typedArg<int64_t>(info, i, name, napi_bigint64_array, false);
    k.data = a.data;
    k.n = a.length;
    k.value = a.value;
  }
  ES_CHECK(k.n < UINT32_MAX, kInvalidArgument,
           "Expected " << name << " to hold fewer than 2^32 keys but received " << k.n);
  return k;
}

void checkLength(size_t actual, size_t expected, const char* name, const char* what) {
  ES_CHECK(actual == expected, kShapeMismatch,
           "Expected " << name << " to hold " << expected << " " << what << " but received " << actual);
}

double numberArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = argAt(info, i);
  ES_CHECK(v.IsNumber(), kInvalidType, "Expected " << name << " to be a number but received " << describe(v));
  return v.As<Napi::Number>().DoubleValue();
}

double integerArg(const Napi::CallbackInfo& info, size_t i, const char* name, double min, double max,
                  bool allowInfinity) {
  double v = numberArg(info, i, name);
  if (allowInfinity && v == INFINITY) return v;
  ES_CHECK(std::isfinite(v) && v == std::floor(v) && v >= min && v <= max, kInvalidArgument,
           "Expected " << name << " to be an integer in [" << formatNumber(min) << ", " << formatNumber(max)
                       << "] but received " << formatNumber(v));
  return v;
}

bool boolArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = argAt(info, i);
  ES_CHECK(v.IsBoolean(), kInvalidType, "Expected " << name << " to be a boolean but received " << describe(v));
  return v.As<Napi::Boolean>().Value();
}

}  // namespace embedstack
