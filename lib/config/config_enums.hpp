// The config options with a fixed set of values, as enum classes. Their spellings live here, once:
// the schema (config_schema_keys.cpp) parses a value into the enum when it enters (a wrong one is an error with
// the allowed values and a did-you-mean), writes it back for `config show` and the resolved config, and
// every other piece of code compares enums, never strings.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace mgtrain {

enum class SlurmMode { Auto, Off };             // launch.slurm
enum class RdzvBackend { C10d, Static };        // launch.rdzv_backend
enum class ConsoleDedupMode { Auto, On, Off };  // launch.console_dedup
// Registered: a model or data set the worker registered (mgtrain/registry.hpp); its name is in ModelConfig::registered
// (DataConfig::registered). The config spells it by that name, never "registered".
enum class ModelType { Mlp, Cnn, Resnet, Gpt, Torchscript, Registered };        // model.type
enum class DatasetKind { Synthetic, Mnist, Cifar10, Tokens, Npy, Registered };  // data.dataset
enum class DeviceOption { Auto, Cpu, Cuda };                                    // train.device
enum class PrecisionMode { Fp32, Bf16, Fp16 };                                  // train.precision
enum class OptimizerName { Sgd, Adam, Adamw };                                  // optim.name
enum class LrScheduleKind { Constant, Step, Cosine, Linear };                   // optim.schedule
enum class BackendChoice { Auto, Gloo, Nccl };                                  // ddp.backend
enum class Strategy { Ddp, Dp };                                                // ddp.strategy
enum class BestMetric { None, EvalLoss, EvalAccuracy, EvalPerplexity };         // checkpoint.best_metric
enum class WhenBusy { Wait, Skip };                                             // checkpoint.when_busy
enum class OnWriteError { Stop, Continue };                                     // checkpoint.on_write_error
enum class LogLevel { Debug, Info, Warn, Error };                               // log.level
enum class ProgressMode { Auto, Bar, Lines, Off };                              // log.progress

// EnumNames<E>::names[i] is the config spelling of the enumerator with value i.
template <class E>
struct EnumNames;

template <class E, class = void>
struct HasEnumNames : std::false_type {};
template <class E>
struct HasEnumNames<E, std::void_t<decltype(EnumNames<E>::names)>> : std::true_type {};

#define MGTRAIN_ENUM_NAMES(E, ...)                  \
  template <>                                       \
  struct EnumNames<E> {                             \
    static constexpr std::array names{__VA_ARGS__}; \
  }

MGTRAIN_ENUM_NAMES(SlurmMode, std::string_view("auto"), std::string_view("off"));
MGTRAIN_ENUM_NAMES(RdzvBackend, std::string_view("c10d"), std::string_view("static"));
MGTRAIN_ENUM_NAMES(ConsoleDedupMode, std::string_view("auto"), std::string_view("on"), std::string_view("off"));
MGTRAIN_ENUM_NAMES(ModelType, std::string_view("mlp"), std::string_view("cnn"), std::string_view("resnet"),
                   std::string_view("gpt"), std::string_view("torchscript"), std::string_view("registered"));
MGTRAIN_ENUM_NAMES(DatasetKind, std::string_view("synthetic"), std::string_view("mnist"), std::string_view("cifar10"),
                   std::string_view("tokens"), std::string_view("npy"), std::string_view("registered"));
MGTRAIN_ENUM_NAMES(DeviceOption, std::string_view("auto"), std::string_view("cpu"), std::string_view("cuda"));
MGTRAIN_ENUM_NAMES(PrecisionMode, std::string_view("fp32"), std::string_view("bf16"), std::string_view("fp16"));
MGTRAIN_ENUM_NAMES(OptimizerName, std::string_view("sgd"), std::string_view("adam"), std::string_view("adamw"));
MGTRAIN_ENUM_NAMES(LrScheduleKind, std::string_view("constant"), std::string_view("step"), std::string_view("cosine"),
                   std::string_view("linear"));
MGTRAIN_ENUM_NAMES(BackendChoice, std::string_view("auto"), std::string_view("gloo"), std::string_view("nccl"));
MGTRAIN_ENUM_NAMES(Strategy, std::string_view("ddp"), std::string_view("dp"));
MGTRAIN_ENUM_NAMES(BestMetric, std::string_view(""), std::string_view("eval.loss"), std::string_view("eval.accuracy"),
                   std::string_view("eval.perplexity"));
MGTRAIN_ENUM_NAMES(WhenBusy, std::string_view("wait"), std::string_view("skip"));
MGTRAIN_ENUM_NAMES(OnWriteError, std::string_view("stop"), std::string_view("continue"));
MGTRAIN_ENUM_NAMES(LogLevel, std::string_view("debug"), std::string_view("info"), std::string_view("warn"),
                   std::string_view("error"));
MGTRAIN_ENUM_NAMES(ProgressMode, std::string_view("auto"), std::string_view("bar"), std::string_view("lines"),
                   std::string_view("off"));

#undef MGTRAIN_ENUM_NAMES

// The config spelling of `value`, e.g. name_of(PrecisionMode::Bf16) == "bf16".
template <class E>
std::string_view name_of(E value) {
  return EnumNames<E>::names[static_cast<std::size_t>(value)];
}

// The enumerator spelled `text`; nullopt when none is.
template <class E>
std::optional<E> parse_enum(std::string_view text) {
  const auto& names = EnumNames<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace mgtrain

// fmt prints these enums by their config spelling: fmt::format("{}", ModelType::Gpt) == "gpt".
template <class E>
struct fmt::formatter<E, char, std::enable_if_t<mgtrain::HasEnumNames<E>::value>> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(E value, Context& context) const {
    return fmt::formatter<std::string_view>::format(mgtrain::name_of(value), context);
  }
};
