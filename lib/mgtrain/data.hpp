// Public API: the data set interface the trainer reads (mgtrain::DataSource, train/data/data_source.hpp) and the
// helpers for writing one. See docs/trainer.md#bring-your-own-model.
//
// A DataSource is one split (train or test) of a data set, held or mapped in memory:
//   size()            number of samples of the split
//   sample_shape()    shape of one input sample, e.g. {16} for 16 features, {3, 32, 32} for an image
//   num_classes()     classes (the model's output width), or the vocabulary size for token data
//   make_batch(idx)   the samples idx stacked: inputs float32 [B, ...sample_shape] (or int64 tokens),
//                     targets int64 [B] (class ids) or [B, T]; called from loader threads, possibly at once
//   description()     one line for the log
// Every rank opens the same data set; the trainer's distributed sampler gives each rank its shard.
#pragma once

#include "train/data/batch.hpp"
#include "train/data/data_source.hpp"
