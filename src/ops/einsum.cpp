// einsum for what reduces to one (batched) GEMM: the operands are permuted and
// reshaped to A [B, M, K] and B [B, K, N] and multiplied by matmul, so the bits are matmul's
// (numerics.md §5); the result is reshaped and permuted to the output's order. An index in one
// operand only and not in the output is summed out of that operand first (sum, §6). '...' names
// leading axes (sizes equal, no broadcasting). Diagonals (an index twice in an operand) and more
// than two operands are refused.
#include <algorithm>
#include <string>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {

[[noreturn]] void refuse(const std::string& eq, const std::string& why) {
  detail::fail("einsum", "equation '", eq, "': ", why);
}

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// x with its axes named by `letters`: the axes whose letters are not in `keep` summed out
Tensor sum_out(const Tensor& x, std::string& letters, const std::string& keep, CallSite site) {
  std::vector<int> axes;
  std::string rest;
  for (std::size_t i = 0; i < letters.size(); ++i) {
    if (has(keep, letters[i])) rest += letters[i];
    else axes.push_back(static_cast<int>(i));
  }
  if (axes.empty()) return x;
  letters = rest;
  return sum(x, axes, false, site);
}

// x permuted so that its letters read `order`
Tensor arrange(const Tensor& x, const std::string& letters, const std::string& order, CallSite site) {
  std::vector<int> dims;
  bool identity = true;
  for (std::size_t i = 0; i < order.size(); ++i) {
    dims.push_back(static_cast<int>(letters.find(order[i])));
    identity = identity && dims.back() == static_cast<int>(i);
  }
  return identity ? x : permute(x, dims, site);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, CallSite site) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> ins;
  for (std::size_t at = 0;;) {
    const std::size_t comma = lhs.find(',', at);
    ins.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (ins.size() != operands.size())
    refuse(equation, "names " + std::to_string(ins.size()) + " operands, got " + std::to_string(operands.size()));
  if (ins.size() > 2) refuse(equation, "more than two operands; contract them two at a time");
  // '...': the operand's unnamed leading axes, named by letters the equation does not use, the
  // last ones aligned (as NumPy); their sizes must then agree like any index's (no broadcasting)
  std::string spare;
  for (char c = 'Z'; c >= 'A'; --c)
    if (!has(eq, c)) spare += c;
  std::string ell;  // the letters of the longest ellipsis
  for (std::size_t k = 0; k < ins.size(); ++k) {
    const std::size_t at = ins[k].find("...");
    if (at == std::string::npos) continue;
    BITGRAD_CHECK(operands[k].defined(), "einsum", "operand ", k, " is undefined");
    const int named = static_cast<int>(ins[k].size()) - 3;
    const int n = operands[k].ndim() - named;
    if (n < 0 || ins[k].find("...", at + 3) != std::string::npos || n > static_cast<int>(spare.size()))
      refuse(equation, "operand " + std::to_string(k) + " of shape " + operands[k].shape().str() + " does not fit '" + ins[k] + "'");
    if (n > static_cast<int>(ell.size())) ell = spare.substr(spare.size() - static_cast<std::size_t>(n));
    ins[k] = ins[k].substr(0, at) + spare.substr(spare.size() - static_cast<std::size_t>(n)) + ins[k].substr(at + 3);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    if (const std::size_t at = out.find("..."); at != std::string::npos) out = out.substr(0, at) + ell + out.substr(at + 3);
  } else {  // implicit output: the ellipsis' axes, then the letters that appear once, in alphabetical order
    out = ell;
    for (char c = 'A'; c <= 'z'; ++c) {
      std::size_t n = 0;
      for (const std::string& s : ins) n += static_cast<std::size_t>(std::count(s.begin(), s.end(), c));
      if (n == 1 && !has(ell, c)) out += c;
    }
  }
  std::int64_t size_of[128] = {};
  for (std::size_t k = 0; k < ins.size(); ++k) {
    const std::string& s = ins[k];
    const Tensor& t = operands[k];
    BITGRAD_CHECK(t.defined(), "einsum", "operand ", k, " is undefined");
    if (static_cast<int>(s.size()) != t.ndim())
      refuse(equation, "operand " + std::to_string(k) + " has shape " + t.shape().str() + " but '" + s + "' names " +
                           std::to_string(s.size()) + " axes");
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) refuse(equation, std::string("'") + c + "' is not a letter");
      if (std::count(s.begin(), s.end(), c) > 1)
        refuse(equation, std::string("index '") + c + "' appears twice in operand " + std::to_string(k) +
                             " (a diagonal): not a GEMM contraction");
      const std::int64_t n = t.shape()[static_cast<int>(i)];
      if (size_of[static_cast<int>(c)] && size_of[static_cast<int>(c)] - 1 != n)
        refuse(equation, std::string("index '") + c + "' has sizes " + std::to_string(size_of[static_cast<int>(c)] - 1) +
                             " and " + std::to_string(n));
      size_of[static_cast<int>(c)] = n + 1;
    }
  }
  for (char c : out) {
    if (std::count(out.begin(), out.end(), c) > 1) refuse(equation, std::string("index '") + c + "' appears twice in the output");
    if (!size_of[static_cast<int>(c)]) refuse(equation, std::string("output index '") + c + "' is in no operand");
  }

  if (ins.size() == 1) {
    std::string a = ins[0];
    Tensor x = sum_out(operands[0], a, out, site);
    return arrange(x, a, out, site);
  }
  std::string a = ins[0], b = ins[1];
  // an index in one operand only, not in the output: summed out of that operand first
  Tensor ta = sum_out(operands[0], a, out + b, site);
  Tensor tb = sum_out(operands[1], b, out + a, site);
  std::string batch, left, contract, right;
  for (char c : a) {
    if (has(b, c)) (has(out, c) ? batch : contract) += c;
    else left += c;
  }
  for (char c : b)
    if (!has(a, c)) right += c;
  auto prod = [&](const std::string& s) {
    std::int64_t p = 1;
    for (char c : s) p *= size_of[static_cast<int>(c)] - 1;
    return p;
  };
  const std::int64_t Bn = prod(batch), M = prod(left), K = prod(contract), N = prod(right);
  Tensor am = arrange(ta, a, batch + left + contract, site);
  Tensor bm = arrange(tb, b, batch + contract + right, site);
  Tensor y;
  if (batch.empty()) {
    y = matmul(reshape(am, Shape{M, K}, site), reshape(bm, Shape{K, N}, site), site);
  } else {
    y = matmul(reshape(am, Shape{Bn, M, K}, site), reshape(bm, Shape{Bn, K, N}, site), site);
  }
  const std::string have = batch + left + right;
  Shape hs;
  for (char c : have) hs.push_back(size_of[static_cast<int>(c)] - 1);
  y = reshape(y, hs, site);
  return arrange(y, have, out, site);
}

}  // namespace bitgrad
