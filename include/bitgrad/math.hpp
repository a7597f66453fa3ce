// bitgrad's own elementary functions: the same bits on every platform, compiler and code
// path, built from IEEE-exact operations only (docs/numerics.md lists the algorithms and
// their measured accuracy). Use these instead of <cmath> wherever a value can reach a
// result that must be reproducible.
#pragma once

namespace bitgrad::math {

double exp(double x);
double expm1(double x);
double log(double x);
double log1p(double x);
double tanh(double x);
double sigmoid(double x);  // 1 / (1 + e^-x)
double erf(double x);
double sin(double x);
double cos(double x);
double tan(double x);
double pow(double x, double y);
double sqrt(double x);   // IEEE square root
double rsqrt(double x);  // 1 / sqrt(x), two roundings
double sin2pi(double u);  // sin(2 pi u), exact argument reduction
double cos2pi(double u);
// exact: the nearest integer (halves to even), the largest integer <= x, the smallest >= x
double round_even(double x);
double floor(double x);
double ceil(double x);

// f32: evaluated in f64 and rounded once.
float exp(float x);
float expm1(float x);
float log(float x);
float log1p(float x);
float tanh(float x);
float sigmoid(float x);
float erf(float x);
float sin(float x);
float cos(float x);
float tan(float x);
float pow(float x, float y);
float sqrt(float x);
float rsqrt(float x);

}  // namespace bitgrad::math
