// The `npy` data set: NumPy arrays saved with numpy.save, memory-mapped (worker_io/npy_file.hpp reads them).
#pragma once

#include <memory>
#include <string>

#include "train/data/data_source.hpp"

namespace mgtrain {

// Opens <directory>/train_x.npy and train_y.npy (Split::Train) or test_x.npy and test_y.npy (Split::Test).
//  x: [N, ...] of any bool, integer or float dtype; one sample is x[i], shape x.shape[1:] ({1} for a 1-d x), handed
//     to the model as float32 (converted per batch; the file stays mapped, never copied whole).
//  y: [N] integer class ids in [0, classes): classes = largest training label + 1 (the test split reads
//     train_y.npy for it, and a test label outside is an error).
// Errors (UsageError naming the file): a missing file, one that is not a valid .npy (npy_file.hpp), x and y with
// different N, a y that is not 1-d integers, a negative label.
std::unique_ptr<DataSource> open_npy_data(const std::string& directory, Split split);

}  // namespace mgtrain
