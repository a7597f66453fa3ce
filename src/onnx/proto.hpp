// The part of ONNX's protobuf schema (onnx/onnx.proto, IR version 8) that bitgrad reads and
// writes, and its wire format: a reader of untrusted bytes with a limit on every length, count
// and depth (bad bytes are one bitgrad::Error naming the file and the field, never a crash), and a
// writer. No libprotobuf: the wire format is five record kinds, and owning the reader lets every
// limit be checked where the length is read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bitgrad::onnx {

// TensorProto.DataType
enum ElemType : int {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7, kString = 8,
  kBool = 9, kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kComplex64 = 14, kComplex128 = 15, kBfloat16 = 16
};
const char* elem_type_name(int t);

// Limits on what a file may declare (each checked before anything of that size is allocated).
struct Limits {
  std::uint64_t max_file_bytes = std::uint64_t(4) << 30;  // protobuf's own limit is 2 GiB
  int max_depth = 16;                                     // nested messages (graphs inside attributes)
  std::uint64_t max_count = 1u << 24;                      // entries of one repeated field
  int max_dims = 8;                                        // bitgrad's kMaxDims
};

struct TensorProto {
  std::string name;
  int data_type = kUndefined;
  std::vector<std::int64_t> dims;
  std::string raw_data;                  // little-endian values, when present
  std::vector<float> float_data;         // FLOAT (and COMPLEX64) when raw_data is absent
  std::vector<std::int32_t> int32_data;  // INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16
  std::vector<std::int64_t> int64_data;  // INT64
  std::vector<double> double_data;       // DOUBLE
  std::vector<std::uint64_t> uint64_data;  // UINT32, UINT64
  bool has_raw = false;
  bool external = false;   // data_location EXTERNAL or external_data entries: refused by the importer
  bool has_strings = false;
  bool has_segment = false;
};

enum AttrType : int {
  kAttrUndefined = 0, kAttrFloat = 1, kAttrInt = 2, kAttrString = 3, kAttrTensor = 4, kAttrGraph = 5, kAttrFloats = 6,
  kAttrInts = 7, kAttrStrings = 8, kAttrTensors = 9, kAttrGraphs = 10, kAttrSparseTensor = 11, kAttrSparseTensors = 12,
  kAttrTypeProto = 13, kAttrTypeProtos = 14
};

struct AttributeProto {
  std::string name;
  int type = kAttrUndefined;
  float f = 0;
  std::int64_t i = 0;
  std::string s;
  TensorProto t;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
  bool has_graph = false;  // subgraphs (If, Loop, Scan) are not read: bitgrad has no control flow
  bool has_t = false;
  std::string ref_attr_name;
};

struct NodeProto {
  std::vector<std::string> input, output;
  std::string name, op_type, domain;
  std::vector<AttributeProto> attribute;
};

struct ValueInfoProto {
  std::string name;
  bool tensor_type = false;  // a TypeProto.Tensor (else a sequence, map, optional ...)
  int elem_type = kUndefined;
  bool has_shape = false;
  std::vector<std::int64_t> dims;  // -1 for a symbolic or unknown dimension
  std::vector<std::string> dim_params;
};

struct GraphProto {
  std::string name;
  std::vector<NodeProto> node;
  std::vector<TensorProto> initializer;
  std::vector<ValueInfoProto> input, output, value_info;
  bool has_sparse_initializer = false;
};

struct OpsetId {
  std::string domain;
  std::int64_t version = 0;
};

struct ModelProto {
  std::int64_t ir_version = 0;
  std::vector<OpsetId> opset_import;
  std::string producer_name, producer_version;
  GraphProto graph;
  bool has_graph = false;
  bool has_functions = false;
};

// Parses a serialized ModelProto; `name` (the file) begins every error message.
ModelProto parse_model(const std::string& bytes, const std::string& name, const Limits& limits = Limits());
// Serializes a ModelProto (the fields above; packed repeated scalars, raw_data for tensors).
std::string serialize_model(const ModelProto& m);

}  // namespace bitgrad::onnx
