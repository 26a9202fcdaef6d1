// The `cifar10` data set: CIFAR-10 binary batches (the "binary version" archive, cifar-10-batches-bin).
#pragma once

#include <memory>
#include <string>

#include "train/data/data_source.hpp"

namespace mgtrain {

// Opens data_batch_1.bin … data_batch_5.bin (Split::Train) or test_batch.bin (Split::Test) in `directory` (each may
// also be .gz). A file is a sequence of 3073-byte records: one label byte (0..9), then 1024 red, 1024 green and 1024
// blue pixel bytes of a 32x32 image, row-major. Samples are float32 [3, 32, 32]: x/255 normalised per channel with the
// mean and std of the *training* batches (the test split reads them too). 10 classes. No augmentation.
std::unique_ptr<DataSource> open_cifar10_data(const std::string& directory, Split split);

}  // namespace mgtrain
