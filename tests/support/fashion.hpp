// Fashion-MNIST for the tests: skipped (with the reason) when Debian's dataset-fashion-mnist is
// not installed; scripts/install-deps.sh installs it.
#pragma once

#include <unistd.h>

#include <string>

#include "bitgrad/data.hpp"

#define BITGRAD_NEED_FASHION_MNIST()                                                                           \
  do {                                                                                                         \
    if (::access((std::string(bitgrad::data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz").c_str(), R_OK)) \
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";               \
  } while (0)
