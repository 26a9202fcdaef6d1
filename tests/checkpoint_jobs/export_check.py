"""Checks the files of `mgtrain export` from Python, the way users load them (run by tests/checkpoint_jobs/test_export.cpp).

  export_check.py safetensors EXPORTED CHECKPOINT
      EXPORTED follows the safetensors conventions (8-byte little-endian header length, JSON header, string-only
      __metadata__, data_offsets relative to the data start covering it without gaps); every tensor equals the
      checkpoint's "model/<name>" tensor byte for byte and no model tensor is missing. With the `safetensors`
      package installed, safetensors.torch.load_file(EXPORTED) must agree too.
  export_check.py torchscript MODULE REFERENCE EXPORTED
      torch.jit.load(MODULE) is in eval mode, its state_dict() equals the safetensors file EXPORTED (same names,
      same values), and its forward on REFERENCE's "input" reproduces REFERENCE's "output" (the C++ model's).
Prints "ok ..." and exits 0, or prints what differs and exits 1.
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def read_safetensors(path):
    """(tensors: name -> (tensor, raw bytes), metadata) of a safetensors file, read by hand."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail(f"{path}: header length {n} runs past the end")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        fail(f"{path}: __metadata__ must map strings to strings: {metadata}")
    start = 8 + n
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    position = 0
    for begin, end, name in spans:
        if begin != position or end < begin:
            fail(f"{path}: {name} has data_offsets [{begin}, {end}] where {position} was expected (gap or overlap)")
        position = end
    if start + position != len(data):
        fail(f"{path}: the tensors cover {position} data bytes, the file has {len(data) - start}")
    tensors = {}
    for name, info in header.items():
        dtype = DTYPES.get(info["dtype"])
        if dtype is None:
            fail(f"{path}: {name}: unknown dtype {info['dtype']}")
        shape = info["shape"]
        begin, end = info["data_offsets"]
        raw = data[start + begin:start + end]
        itemsize = torch.empty((), dtype=dtype).element_size()
        if len(raw) != math.prod(shape) * itemsize:
            fail(f"{path}: {name}: {len(raw)} bytes for shape {shape} of {info['dtype']}")
        if raw:
            tensor = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
        else:
            tensor = torch.empty(shape, dtype=dtype)
        tensors[name] = (tensor, raw)
    return tensors, metadata


def check_safetensors(exported, checkpoint):
    tensors, metadata = read_safetensors(exported)
    stored, stored_metadata = read_safetensors(checkpoint)
    model = {name[len("model/"):]: value for name, value in stored.items() if name.startswith("model/")}
    if set(tensors) != set(model):
        fail(f"names differ: only exported {sorted(set(tensors) - set(model))}, only in the checkpoint {sorted(set(model) - set(tensors))}")
    for name, (tensor, raw) in tensors.items():
        if raw != model[name][1] or tensor.dtype != model[name][0].dtype or tensor.shape != model[name][0].shape:
            fail(f"{name} differs from the checkpoint's model/{name}")
    expected = {"format": "pt", "mgtrain.source": os.path.basename(checkpoint),
                "mgtrain.step": stored_metadata.get("mgtrain.step"), "mgtrain.model": stored_metadata.get("mgtrain.model")}
    for key, value in expected.items():
        if metadata.get(key) != value:
            fail(f"__metadata__[{key!r}] is {metadata.get(key)!r}, expected {value!r}")
    how = "by hand"
    try:
        import safetensors.torch  # not installed on every machine; the hand reader above is the reference
        loaded = safetensors.torch.load_file(exported)
        if set(loaded) != set(tensors) or any(not torch.equal(loaded[k], tensors[k][0]) for k in loaded):
            fail("safetensors.torch.load_file disagrees with the file's bytes")
        how = "by hand and with safetensors.torch.load_file"
    except ImportError:
        pass
    print(f"ok {len(tensors)} tensors equal to the checkpoint's, read {how}")


def check_torchscript(module_path, reference_path, exported):
    extra = {"mgtrain.json": ""}
    module = torch.jit.load(module_path, _extra_files=extra)
    info = json.loads(extra["mgtrain.json"])
    if not {"model", "step", "source"} <= set(info):
        fail(f"mgtrain.json lacks keys: {info}")
    if module.training:
        fail("the module was saved in training mode")
    weights, _ = read_safetensors(exported)
    state = module.state_dict()
    if set(state) != set(weights):
        fail(f"state_dict keys differ from the safetensors names: only in the module {sorted(set(state) - set(weights))}, "
             f"only in the file {sorted(set(weights) - set(state))}")
    for name, value in state.items():
        if not torch.equal(value, weights[name][0]):
            fail(f"state_dict()[{name!r}] differs from the exported weights")
    reference, _ = read_safetensors(reference_path)
    x, expected = reference["input"][0], reference["output"][0]
    with torch.no_grad():
        got = module(x)
    if got.shape != expected.shape:
        fail(f"forward gives shape {list(got.shape)}, the C++ model {list(expected.shape)}")
    diff = (got - expected).abs().max().item()
    if not torch.allclose(got, expected, rtol=1e-5, atol=1e-6):
        fail(f"forward differs from the C++ model's by up to {diff}")
    module.train()
    module(x).float().sum().backward()  # the training branches (BatchNorm batch statistics, dropout) run too
    print(f"ok forward of {list(x.shape)} matches the C++ model (max |diff| {diff}), {len(state)} state_dict entries")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "safetensors":
        check_safetensors(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "torchscript":
        check_torchscript(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        fail(__doc__)
