"""The precision a network trains in (`RunConfig.precision`, `lmbench train --precision`, `reproduce --precision`).

- fp32: every product in float32.
- bf16: mixed precision, as language models are trained on GPUs and TPUs: the forward pass's products
  (the features, the recurrences and attention, the output layer's |V|-sized GEMMs) in bfloat16 under
  torch's autocast, the weights, their gradients and the optimizer's state in float32 (autocast casts
  copies; the backward pass accumulates into the fp32 weights' gradients, the update is applied in fp32).
  No loss scaling: bfloat16 has float32's exponent range.
- auto (the default): bf16 where the device computes bfloat16 natively (a CPU with AVX512_BF16 or AMX, torch's oneDNN
  path; a GPU torch says supports it) and the family is measured faster for it (its registration's
  `mixed_precision`, from bench/train_speed.py --precision), else fp32. It is resolved when the run's
  configuration is made, so that the configuration, its cache key and its record name what ran.

Whatever a network trained in, its exact scoring (validation after each epoch, the final valid and test
figures) is float32: the perplexities are fp32 log-probabilities of the trained weights.
"""

from __future__ import annotations

import contextlib

PRECISIONS = ("fp32", "bf16")  # what a run records; "auto" resolves to one of them (`resolve`)
CHOICES = PRECISIONS + ("auto",)


def native_bf16(device: str) -> bool:
    """Whether `device` ("auto", "cpu", "cuda", "cuda:N") computes bfloat16 products natively."""
    import torch
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    return bool(avx512_bf16() or amx())


def resolve(precision: str, family, device: str) -> str:
    """The precision a run of `family` (a neural.families.Family) on `device` trains in: `precision`, or
    for "auto" bf16 where it is native and the family gains from it (module docstring)."""
    if precision != "auto":
        return precision
    return "bf16" if family.mixed_precision and native_bf16(device) else "fp32"


def autocast(device_type: str, precision: str):
    """The context of a training update's forward pass: bfloat16 products under bf16 (`bf16_products`),
    nothing under fp32."""
    return bf16_products(device_type, precision == "bf16")


@contextlib.contextmanager
def bf16_products(device_type: str, enabled: bool = True):
    """Products in bfloat16 (torch's autocast) when `enabled`, also on a CPU that computes none natively,
    where torch's oneDNN path creates no bfloat16 LSTM primitive (a RuntimeError): there oneDNN is set
    aside inside the context and torch's own kernels compute instead, emulating bfloat16 (slower; the
    LSTM's recurrence in float32). `--precision auto` never asks for it there; `--precision bf16` may."""
    if not enabled:
        yield
        return
    import torch
    emulated = device_type == "cpu" and not native_bf16("cpu")
    before = torch.backends.mkldnn.enabled
    if emulated:
        torch.backends.mkldnn.enabled = False
    try:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            yield
    finally:
        torch.backends.mkldnn.enabled = before
