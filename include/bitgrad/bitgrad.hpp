// The whole public API.
#pragma once

#include "bitgrad/autograd.hpp"
#include "bitgrad/dist.hpp"
#include "bitgrad/dtype.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/gradcheck.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/ops.hpp"
#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/selftest.hpp"
#include "bitgrad/shape.hpp"
#include "bitgrad/storage.hpp"
#include "bitgrad/tensor.hpp"
#include "bitgrad/version.hpp"
