// Internal declarations shared by the ISA translation units of the math layer.
#pragma once

namespace bitgrad::math {
// x = k pi/2 + rh + rl for finite |x| >= 2^20; returns k mod 4.
int reduce_pio2_large(double x, double* rh, double* rl);
}  // namespace bitgrad::math
