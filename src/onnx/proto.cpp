// ONNX's protobuf messages on the wire (proto.hpp). Reading: every length is checked against
// the bytes left before anything is allocated, every repeated field against Limits::max_count,
// nesting against max_depth; an unknown field is skipped by its wire type (as protobuf does);
// groups (wire types 3, 4) and truncated or overlong varints are errors.
#include "onnx/proto.hpp"

#include <cstring>

#include "bitgrad/error.hpp"

namespace bitgrad::onnx {

const char* elem_type_name(int t) {
  switch (t) {
    case kFloat: return "float";
    case kUint8: return "uint8";
    case kInt8: return "int8";
    case kUint16: return "uint16";
    case kInt16: return "int16";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kString: return "string";
    case kBool: return "bool";
    case kFloat16: return "float16";
    case kDouble: return "double";
    case kUint32: return "uint32";
    case kUint64: return "uint64";
    case kComplex64: return "complex64";
    case kComplex128: return "complex128";
    case kBfloat16: return "bfloat16";
    default: return "undefined";
  }
}

namespace {

enum Wire { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

class Reader {
 public:
  Reader(const std::string& name, const Limits& limits, const std::uint8_t* begin) : name_(name), limits_(limits), begin_(begin) {}

  struct Span {
    const std::uint8_t* p;
    const std::uint8_t* end;
    bool done() const { return p == end; }
  };

  [[noreturn]] void fail(const Span& s, const char* message, const std::string& field) const {
    throw Error(name_ + ": byte " + std::to_string(s.p - begin_) + ": " + field + ": " + message);
  }

  std::uint64_t varint(Span& s, const std::string& field) const {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (s.p == s.end) fail(s, "truncated varint", field);
      const std::uint8_t b = *s.p++;
      if (shift == 63 && (b & 0x7e)) fail(s, "varint overflows 64 bits", field);
      v |= std::uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(s, "varint longer than 10 bytes", field);
  }

  // tag: field number and wire type
  bool tag(Span& s, std::uint32_t& field, int& wire) const {
    if (s.done()) return false;
    const std::uint64_t t = varint(s, "tag");
    field = static_cast<std::uint32_t>(t >> 3);
    wire = static_cast<int>(t & 7);
    if (field == 0 || (t >> 3) > 0x1fffffff) fail(s, "field number out of range", "tag");
    return true;
  }

  Span sub(Span& s, const std::string& field) const {
    const std::uint64_t n = varint(s, field);
    if (n > static_cast<std::uint64_t>(s.end - s.p)) fail(s, "length beyond the end of its message", field);
    Span r{s.p, s.p + n};
    s.p += n;
    return r;
  }

  std::string bytes(Span& s, const std::string& field) const {
    const Span r = sub(s, field);
    return std::string(reinterpret_cast<const char*>(r.p), static_cast<std::size_t>(r.end - r.p));
  }

  template <class T>
  T fixed(Span& s, const std::string& field) const {
    if (static_cast<std::size_t>(s.end - s.p) < sizeof(T)) fail(s, "truncated fixed-width value", field);
    T v;
    std::memcpy(&v, s.p, sizeof(T));  // little-endian hosts only (bitgrad's targets)
    s.p += sizeof(T);
    return v;
  }

  void skip(Span& s, int wire, const std::string& field) const {
    switch (wire) {
      case kVarint: varint(s, field); return;
      case kFixed64: fixed<std::uint64_t>(s, field); return;
      case kLen: sub(s, field); return;
      case kFixed32: fixed<std::uint32_t>(s, field); return;
      default: fail(s, "wire type 3/4/6/7 (groups or invalid)", field);
    }
  }

  template <class V>
  void count(const Span& s, const V& v, const std::string& field) const {
    if (v.size() >= limits_.max_count) fail(s, "more entries than the limit", field);
  }

  void expect(const Span& s, int wire, int want, const std::string& field) const {
    if (wire != want) fail(s, "unexpected wire type", field);
  }

  // a repeated integer field: one varint, or a packed run of them
  template <class T>
  void ints(Span& s, int wire, std::vector<T>& out, const std::string& field) const {
    if (wire == kVarint) {
      count(s, out, field);
      out.push_back(static_cast<T>(varint(s, field)));
      return;
    }
    expect(s, wire, kLen, field);
    Span r = sub(s, field);
    while (!r.done()) {
      count(r, out, field);
      out.push_back(static_cast<T>(varint(r, field)));
    }
  }

  // a repeated fixed-width field (float, double): one value, or a packed run
  template <class T>
  void fixeds(Span& s, int wire, std::vector<T>& out, const std::string& field) const {
    const int single = sizeof(T) == 4 ? kFixed32 : kFixed64;
    if (wire == single) {
      count(s, out, field);
      out.push_back(fixed<T>(s, field));
      return;
    }
    expect(s, wire, kLen, field);
    Span r = sub(s, field);
    if ((r.end - r.p) % sizeof(T)) fail(s, "packed length not a multiple of the value's size", field);
    const std::size_t n = static_cast<std::size_t>(r.end - r.p) / sizeof(T);
    if (out.size() + n > limits_.max_count) fail(s, "more entries than the limit", field);
    const std::size_t at = out.size();
    if (n == 0) return;  // an empty packed run: out.data() may be null, which memcpy may not see
    out.resize(at + n);
    std::memcpy(out.data() + at, r.p, n * sizeof(T));
  }

  void depth(const Span& s, int d, const char* what) const {
    if (d > limits_.max_depth) fail(s, "messages nested deeper than the limit", what);
  }

  // The fields of one message: on(field, wire) reads the fields it knows and returns false for
  // the others, which are skipped ("MSG field N").
  template <class F>
  void fields(Span& s, const char* msg, F&& on) const {
    std::uint32_t f;
    int w;
    while (tag(s, f, w))
      if (!on(f, w)) skip(s, w, std::string(msg) + " field " + std::to_string(f));
  }
  // one field of each kind, its wire type checked
  void text(Span& s, int w, std::string& out, const char* field) const {
    expect(s, w, kLen, field);
    out = bytes(s, field);
  }
  template <class T>
  void integer(Span& s, int w, T& out, const char* field) const {
    expect(s, w, kVarint, field);
    out = static_cast<T>(varint(s, field));
  }
  void texts(Span& s, int w, std::vector<std::string>& out, const char* field) const {
    expect(s, w, kLen, field);
    count(s, out, field);
    out.push_back(bytes(s, field));
  }
  template <class T, class Parse>
  void message(Span& s, int w, std::vector<T>& out, const char* field, Parse parse) const {
    expect(s, w, kLen, field);
    count(s, out, field);
    out.push_back(parse(sub(s, field)));
  }

  TensorProto tensor(Span s, int d) const {
    depth(s, d, "TensorProto");
    TensorProto t;
    fields(s, "TensorProto", [&](std::uint32_t f, int w) {
      switch (f) {
        case 1: ints(s, w, t.dims, "TensorProto.dims"); break;
        case 2: integer(s, w, t.data_type, "TensorProto.data_type"); break;
        case 3: t.has_segment = true; skip(s, w, "TensorProto.segment"); break;
        case 4: fixeds(s, w, t.float_data, "TensorProto.float_data"); break;
        case 5: ints(s, w, t.int32_data, "TensorProto.int32_data"); break;
        case 6: t.has_strings = true; skip(s, w, "TensorProto.string_data"); break;
        case 7: ints(s, w, t.int64_data, "TensorProto.int64_data"); break;
        case 8: text(s, w, t.name, "TensorProto.name"); break;
        case 9: text(s, w, t.raw_data, "TensorProto.raw_data"); t.has_raw = true; break;
        case 10: fixeds(s, w, t.double_data, "TensorProto.double_data"); break;
        case 11: ints(s, w, t.uint64_data, "TensorProto.uint64_data"); break;
        case 13: t.external = true; skip(s, w, "TensorProto.external_data"); break;
        case 14: {
          std::uint64_t location = 0;
          integer(s, w, location, "TensorProto.data_location");
          if (location != 0) t.external = true;
          break;
        }
        default: return false;
      }
      if (t.dims.size() > static_cast<std::size_t>(limits_.max_dims)) fail(s, "more dimensions than the limit", "TensorProto.dims");
      return true;
    });
    return t;
  }

  AttributeProto attribute(Span s, int d) const {
    depth(s, d, "AttributeProto");
    AttributeProto a;
    fields(s, "AttributeProto", [&](std::uint32_t f, int w) {  // tensors, sparse tensors, type protos: unused
      switch (f) {
        case 1: text(s, w, a.name, "AttributeProto.name"); break;
        case 2: expect(s, w, kFixed32, "AttributeProto.f"); a.f = fixed<float>(s, "AttributeProto.f"); break;
        case 3: integer(s, w, a.i, "AttributeProto.i"); break;
        case 4: text(s, w, a.s, "AttributeProto.s"); break;
        case 5: {
          expect(s, w, kLen, "AttributeProto.t");
          a.t = tensor(sub(s, "AttributeProto.t"), d + 1);
          a.has_t = true;
          break;
        }
        case 6: case 11: a.has_graph = true; skip(s, w, "AttributeProto.g"); break;  // subgraphs: not read
        case 7: fixeds(s, w, a.floats, "AttributeProto.floats"); break;
        case 8: ints(s, w, a.ints, "AttributeProto.ints"); break;
        case 9: texts(s, w, a.strings, "AttributeProto.strings"); break;
        case 20: integer(s, w, a.type, "AttributeProto.type"); break;
        case 21: text(s, w, a.ref_attr_name, "AttributeProto.ref_attr_name"); break;
        default: return false;
      }
      return true;
    });
    return a;
  }

  NodeProto node(Span s, int d) const {
    depth(s, d, "NodeProto");
    NodeProto n;
    fields(s, "NodeProto", [&](std::uint32_t f, int w) {
      switch (f) {
        case 1: texts(s, w, n.input, "NodeProto.input"); break;
        case 2: texts(s, w, n.output, "NodeProto.output"); break;
        case 3: text(s, w, n.name, "NodeProto.name"); break;
        case 4: text(s, w, n.op_type, "NodeProto.op_type"); break;
        case 5: message(s, w, n.attribute, "NodeProto.attribute", [&](Span a) { return attribute(a, d + 1); }); break;
        case 7: text(s, w, n.domain, "NodeProto.domain"); break;
        default: return false;
      }
      return true;
    });
    return n;
  }

  void shape(Span s, ValueInfoProto& v) const {
    v.has_shape = true;
    fields(s, "TensorShapeProto", [&](std::uint32_t f, int w) {
      if (f != 1) return false;
      expect(s, w, kLen, "TensorShapeProto.dim");
      if (v.dims.size() >= static_cast<std::size_t>(limits_.max_dims)) fail(s, "more dimensions than the limit", "TensorShapeProto.dim");
      Span dim = sub(s, "TensorShapeProto.dim");
      std::int64_t value = -1;
      std::string param;
      fields(dim, "Dimension", [&](std::uint32_t g, int x) {
        if (g == 1) {
          integer(dim, x, value, "Dimension.dim_value");
          if (value < 0) value = -1;
        } else if (g == 2) {
          text(dim, x, param, "Dimension.dim_param");
        } else {
          return false;
        }
        return true;
      });
      v.dims.push_back(value);
      v.dim_params.push_back(param);
      return true;
    });
  }

  ValueInfoProto value_info(Span s, int d) const {
    depth(s, d, "ValueInfoProto");
    ValueInfoProto v;
    fields(s, "ValueInfoProto", [&](std::uint32_t f, int w) {
      if (f == 1) {
        text(s, w, v.name, "ValueInfoProto.name");
        return true;
      }
      if (f != 2) return false;
      expect(s, w, kLen, "ValueInfoProto.type");  // TypeProto: only its tensor_type is read
      Span type = sub(s, "ValueInfoProto.type");
      fields(type, "TypeProto", [&](std::uint32_t g, int x) {
        if (g != 1) return false;
        expect(type, x, kLen, "TypeProto.tensor_type");
        v.tensor_type = true;
        Span tt = sub(type, "TypeProto.tensor_type");
        fields(tt, "TypeProto.Tensor", [&](std::uint32_t h, int y) {
          if (h == 1) {
            integer(tt, y, v.elem_type, "TypeProto.Tensor.elem_type");
          } else if (h == 2) {
            expect(tt, y, kLen, "TypeProto.Tensor.shape");
            shape(sub(tt, "TypeProto.Tensor.shape"), v);
          } else {
            return false;
          }
          return true;
        });
        return true;
      });
      return true;
    });
    return v;
  }

  GraphProto graph(Span s, int d) const {
    depth(s, d, "GraphProto");
    GraphProto g;
    auto value = [&](Span x) { return value_info(x, d + 1); };
    fields(s, "GraphProto", [&](std::uint32_t f, int w) {
      switch (f) {
        case 1: message(s, w, g.node, "GraphProto.node", [&](Span x) { return node(x, d + 1); }); break;
        case 2: text(s, w, g.name, "GraphProto.name"); break;
        case 5: message(s, w, g.initializer, "GraphProto.initializer", [&](Span x) { return tensor(x, d + 1); }); break;
        case 11: message(s, w, g.input, "GraphProto.input", value); break;
        case 12: message(s, w, g.output, "GraphProto.output", value); break;
        case 13: message(s, w, g.value_info, "GraphProto.value_info", value); break;
        case 15: g.has_sparse_initializer = true; skip(s, w, "GraphProto.sparse_initializer"); break;
        default: return false;
      }
      return true;
    });
    return g;
  }

  OpsetId opset(Span o) const {
    OpsetId id;
    fields(o, "OperatorSetIdProto", [&](std::uint32_t g, int x) {
      if (g == 1) text(o, x, id.domain, "OperatorSetIdProto.domain");
      else if (g == 2) integer(o, x, id.version, "OperatorSetIdProto.version");
      else return false;
      return true;
    });
    return id;
  }

  ModelProto model(Span s) const {
    ModelProto m;
    fields(s, "ModelProto", [&](std::uint32_t f, int w) {
      switch (f) {
        case 1: integer(s, w, m.ir_version, "ModelProto.ir_version"); break;
        case 2: text(s, w, m.producer_name, "ModelProto.producer_name"); break;
        case 3: text(s, w, m.producer_version, "ModelProto.producer_version"); break;
        case 7: {
          expect(s, w, kLen, "ModelProto.graph");
          if (m.has_graph) fail(s, "a second graph", "ModelProto.graph");
          m.graph = graph(sub(s, "ModelProto.graph"), 1);
          m.has_graph = true;
          break;
        }
        case 8: message(s, w, m.opset_import, "ModelProto.opset_import", [&](Span o) { return opset(o); }); break;
        case 25: m.has_functions = true; skip(s, w, "ModelProto.functions"); break;
        default: return false;
      }
      return true;
    });
    return m;
  }

 private:
  const std::string& name_;
  const Limits& limits_;
  const std::uint8_t* begin_;
};

// ---- writing ----------------------------------------------------------------------------------
class Writer {
 public:
  std::string out;
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out += static_cast<char>(v);
  }
  void tag(std::uint32_t field, int wire) { varint((std::uint64_t(field) << 3) | static_cast<std::uint64_t>(wire)); }
  void int_field(std::uint32_t field, std::int64_t v) {
    tag(field, kVarint);
    varint(static_cast<std::uint64_t>(v));
  }
  void bytes_field(std::uint32_t field, const std::string& s) {
    tag(field, kLen);
    varint(s.size());
    out += s;
  }
  void float_field(std::uint32_t field, float f) {
    tag(field, kFixed32);
    char b[4];
    std::memcpy(b, &f, 4);
    out.append(b, 4);
  }
  template <class T>
  void packed_ints(std::uint32_t field, const std::vector<T>& v) {
    if (v.empty()) return;
    Writer w;
    for (const T x : v) w.varint(static_cast<std::uint64_t>(static_cast<std::int64_t>(x)));
    bytes_field(field, w.out);
  }
  template <class T>
  void packed_fixed(std::uint32_t field, const std::vector<T>& v) {
    if (v.empty()) return;
    bytes_field(field, std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
  }
};

std::string tensor_bytes(const TensorProto& t) {
  Writer w;
  w.packed_ints(1, t.dims);
  w.int_field(2, t.data_type);
  w.packed_fixed(4, t.float_data);
  w.packed_ints(5, t.int32_data);
  w.packed_ints(7, t.int64_data);
  if (!t.name.empty()) w.bytes_field(8, t.name);
  if (t.has_raw) w.bytes_field(9, t.raw_data);
  w.packed_fixed(10, t.double_data);
  w.packed_ints(11, t.uint64_data);
  return w.out;
}

std::string attribute_bytes(const AttributeProto& a) {
  Writer w;
  w.bytes_field(1, a.name);
  switch (a.type) {
    case kAttrFloat: w.float_field(2, a.f); break;
    case kAttrInt: w.int_field(3, a.i); break;
    case kAttrString: w.bytes_field(4, a.s); break;
    case kAttrTensor: w.bytes_field(5, tensor_bytes(a.t)); break;
    case kAttrFloats: for (const float f : a.floats) w.float_field(7, f); break;
    case kAttrInts: for (const std::int64_t i : a.ints) w.int_field(8, i); break;
    case kAttrStrings: for (const std::string& s : a.strings) w.bytes_field(9, s); break;
    default: break;
  }
  w.int_field(20, a.type);
  return w.out;
}

std::string value_info_bytes(const ValueInfoProto& v) {
  Writer w;
  w.bytes_field(1, v.name);
  if (v.tensor_type) {
    Writer tt;
    tt.int_field(1, v.elem_type);
    if (v.has_shape) {
      Writer shape;
      for (std::size_t i = 0; i < v.dims.size(); ++i) {
        Writer dim;
        if (i < v.dim_params.size() && !v.dim_params[i].empty()) dim.bytes_field(2, v.dim_params[i]);
        else if (v.dims[i] >= 0) dim.int_field(1, v.dims[i]);
        shape.bytes_field(1, dim.out);
      }
      tt.bytes_field(2, shape.out);
    }
    Writer type;
    type.bytes_field(1, tt.out);
    w.bytes_field(2, type.out);
  }
  return w.out;
}

}  // namespace

ModelProto parse_model(const std::string& bytes, const std::string& name, const Limits& limits) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
  Reader r(name, limits, p);
  Reader::Span s{p, p + bytes.size()};
  if (bytes.size() > limits.max_file_bytes) r.fail(s, "file larger than the limit", "ModelProto");
  ModelProto m = r.model(s);
  if (!m.has_graph) throw Error(name + ": not an ONNX model: no graph (ModelProto.graph)");
  return m;
}

std::string serialize_model(const ModelProto& m) {
  Writer w;
  w.int_field(1, m.ir_version);
  if (!m.producer_name.empty()) w.bytes_field(2, m.producer_name);
  if (!m.producer_version.empty()) w.bytes_field(3, m.producer_version);
  Writer g;
  for (const NodeProto& n : m.graph.node) {
    Writer nw;
    for (const std::string& i : n.input) nw.bytes_field(1, i);
    for (const std::string& o : n.output) nw.bytes_field(2, o);
    if (!n.name.empty()) nw.bytes_field(3, n.name);
    nw.bytes_field(4, n.op_type);
    for (const AttributeProto& a : n.attribute) nw.bytes_field(5, attribute_bytes(a));
    if (!n.domain.empty()) nw.bytes_field(7, n.domain);
    g.bytes_field(1, nw.out);
  }
  g.bytes_field(2, m.graph.name);
  for (const TensorProto& t : m.graph.initializer) g.bytes_field(5, tensor_bytes(t));
  for (const ValueInfoProto& v : m.graph.input) g.bytes_field(11, value_info_bytes(v));
  for (const ValueInfoProto& v : m.graph.output) g.bytes_field(12, value_info_bytes(v));
  for (const ValueInfoProto& v : m.graph.value_info) g.bytes_field(13, value_info_bytes(v));
  w.bytes_field(7, g.out);
  for (const OpsetId& o : m.opset_import) {
    Writer ow;
    if (!o.domain.empty()) ow.bytes_field(1, o.domain);
    ow.int_field(2, o.version);
    w.bytes_field(8, ow.out);
  }
  return w.out;
}

}  // namespace bitgrad::onnx
