// The `mnist` data set: MNIST-format IDX files (MNIST, Fashion-MNIST, KMNIST, ...), raw or gzip-compressed.
#pragma once

#include <memory>
#include <string>

#include "train/data/data_source.hpp"

namespace mgtrain {

// Opens train-images-idx3-ubyte / train-labels-idx1-ubyte (Split::Train) or t10k-images-idx3-ubyte /
// t10k-labels-idx1-ubyte (Split::Test) in `directory`, each optionally with a .gz suffix.
// Samples are float32 [1, rows, cols]: x/255 normalised with the mean and std of the *training* images (so the test
// split also reads the training images for them). Classes: max(10, largest label + 1).
std::unique_ptr<DataSource> open_mnist_data(const std::string& directory, Split split);

}  // namespace mgtrain
