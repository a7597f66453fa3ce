// The scalar entry points of the elementary functions: the level-0 instantiation of
// mathfn_impl.hpp, compiled without SIMD flags. The SIMD kernels instantiate the same
// source at their level; tests compare the two bit for bit.
#define BITGRAD_SIMD_LEVEL 0
#include "math/isa_prelude.hpp"

#include "bitgrad/math.hpp"

namespace bitgrad::math {
namespace isa_scalar {
#include "math/simd.hpp"
#include "math/tables.inc"
#include "math/mathfn_impl.hpp"
}  // namespace isa_scalar

namespace s = isa_scalar;

double exp(double x) { return s::exp_f64(x); }
double expm1(double x) { return s::expm1_f64(x); }
double log(double x) { return s::log_f64(x); }
double log1p(double x) { return s::log1p_f64(x); }
double tanh(double x) { return s::tanh_f64(x); }
double sigmoid(double x) { return s::sigmoid_f64(x); }
double erf(double x) { return s::erf_f64(x); }
double sin(double x) { return s::sincos_f64(x, 0); }
double cos(double x) { return s::sincos_f64(x, 1); }
double tan(double x) { return s::tan_f64(x); }
double round_even(double x) { return s::round_even_f64(x); }
double floor(double x) { return s::floor_f64(x); }
double ceil(double x) { return s::ceil_f64(x); }
double pow(double x, double y) { return s::pow_f64(x, y); }
double sqrt(double x) { return std::sqrt(x); }
double rsqrt(double x) { return s::rsqrt_f64(x); }
double sin2pi(double u) { return s::sincos2pi_f64(u, 0); }
double cos2pi(double u) { return s::sincos2pi_f64(u, 1); }

float exp(float x) { return static_cast<float>(s::exp_f64(x)); }
float expm1(float x) { return static_cast<float>(s::expm1_f64(x)); }
float log(float x) { return static_cast<float>(s::log_f64(x)); }
float log1p(float x) { return static_cast<float>(s::log1p_f64(x)); }
float tanh(float x) { return s::tanh_f32(x); }
float sigmoid(float x) { return s::sigmoid_f32(x); }
float erf(float x) { return static_cast<float>(s::erf_f64(x)); }
float sin(float x) { return static_cast<float>(s::sincos_f64(x, 0)); }
float cos(float x) { return static_cast<float>(s::sincos_f64(x, 1)); }
float tan(float x) { return static_cast<float>(s::tan_f64(x)); }
float pow(float x, float y) { return static_cast<float>(s::pow_f64(x, y)); }
float sqrt(float x) { return std::sqrt(x); }
float rsqrt(float x) { return static_cast<float>(s::rsqrt_f64(x)); }

}  // namespace bitgrad::math
