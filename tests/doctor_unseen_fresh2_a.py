"""Unseen cases written on 2026-11-29 by a helper who never read the doctor's code or the catalog's
patterns: only the catalog's entry titles, to choose each case's `expected` by its cause. Each model
is the few lines of a public report that matter (cited first in its docstring, with what torch
2.14.1 did with it on the CPU). Batch A of the second round: transformer and LLM code (flex
attention and its block masks), quantization with `torch.ao`, dynamic lengths in audio and speech
models (STFT frontends, masks from lengths, packed sequences), and Python data structures in
`forward` (NamedTuples, lists of varying length).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.export import Dim
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from unseen_case import Unseen


# ------------------------------------------------------------------ transformer and LLM code
def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class FlexAttentionWithBlockMask(nn.Module):
    """pytorch/pytorch#165948 (_dynamo_graph_capture_for_export cannot trace flex_attention with
    block_mask kwarg): `flex_attention(query, key, value, block_mask=block_mask)` where the causal
    `BlockMask` from `create_block_mask` is passed to the model as a keyword input.

    2.14.1: eager runs; `torch.export.export` raises `ValueError: Unsupported input type <class
    'torch.nn.attention.flex_attention.BlockMask'>. Export only supports pytree containers of basic
    types (Tensor, int, float, ...) as input.`"""

    def forward(self, query, key, value, block_mask=None):
        return flex_attention(query, key, value, block_mask=block_mask)


def _block_mask_case() -> dict:
    q, k, v = (torch.randn(2, 4, 128, 16) for _ in range(3))
    block_mask = create_block_mask(_causal, 2, 4, 128, 128, device="cpu")
    return dict(model=FlexAttentionWithBlockMask(), args=(q, k, v), kwargs={"block_mask": block_mask})


class FlexAttentionBlock(nn.Module):
    """pytorch/pytorch#140849 (flex_attention + `export_for_inference` ` NYI: querying is_contiguous
    inside of vmap for memory_format other than torch.contiguous_format`): the report's
    `MinimalAttention`, a ViT attention layer whose core is `flex_attention(q, k, v, scale=...)`,
    exported for inference (on CUDA in the report; here on the CPU, with a dynamic batch). On the
    CPU eager flex attention refuses parameters that require grad, so the case freezes them.

    2.14.1: the reported error is gone: export and `run_decompositions()` pass and the program
    equals eager at batch 3. But `torch.export.save` of the program raises
    `torch._export.serde.serialize.SerializeError: Failed serializing node flex_attention in graph:
    ... torch.ops.higher_order.flex_attention`: the program cannot be saved. No catalog entry covers
    a higher-order operator the serializer cannot write: unclassified."""

    def __init__(self, dim=64, num_heads=8, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(0, 3, 2, 1, 4)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        attn_out = flex_attention(q, k, v, scale=self.scale)
        return self.proj(attn_out.transpose(1, 2).reshape(B, N, C))


# ------------------------------------------------------------------ quantization with torch.ao
class QatHead(nn.Module):
    """pytorch/pytorch#167063 (`torch.onnx.export` with `dynamo` breaks `FakeQuantize` exporting):
    after quantization-aware training the `torch.ao.quantization.FakeQuantize` module stays in the
    model, in eval mode with `disable_observer()`; the report's export failed with both
    `torch.export.export(..., strict=False)` and `strict=True`. Here the fake-quant sits on a linear
    layer's output.

    2.14.1: eager runs; `torch.export.export` (non-strict) raises `GuardOnDataDependentSymNode: Could
    not guard on data-dependent expression Eq(u0, 1)` from `FakeQuantize.forward`, which branches on
    its `observer_enabled` / `fake_quant_enabled` buffers. (Strict export stops earlier: Dynamo skips
    `FakeQuantize.forward`, `torch/ao` being on its skip list.)"""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fake_quant = torch.ao.quantization.FakeQuantize()

    def forward(self, x):
        return self.fake_quant(self.fc(x))


def _qat_head() -> QatHead:
    model = QatHead().eval()
    model(torch.randn(8, 4))  # one calibration step with the observer on, as training leaves it
    model.fake_quant.disable_observer()
    return model


# ------------------------------------------------------------------ audio and speech lengths
class StftFrontend(nn.Module):
    """pytorch/pytorch#135087 ([export] _fft_r2c does not support dynamic shapes): `signals.stft(
    n_fft=512, hop_length=160, win_length=320, window=hann(320), return_complex=True,
    pad_mode="constant")` on [B, T] audio, exported with `Dim("dim1")` and `Dim("dim2")` on both
    axes; it failed in `_fft_r2c`. (T is 1600 here, 16000 in the report.)

    2.14.1: `_fft_r2c` traces, but export raises `UserError: Constraints violated (dim2)! ... Not
    all values of dim2 = L['signals'].size()[1] in the specified range satisfy the generated guard
    (1 + (L['signals'].size()[1] // 160)) != 1`, with no suggested fix: the frame count (a stride of
    160 over T) is assumed not to be 1, i.e. T >= 160, and that bound is only in the guard. With
    `Dim("dim2", min=160)` it exports and equals eager."""

    def __init__(self):
        super().__init__()
        self._window = torch.hann_window(window_length=320)

    def forward(self, signals):
        return signals.stft(
            n_fft=512,
            hop_length=160,
            win_length=320,
            return_complex=True,
            window=self._window,
            pad_mode="constant",
        )


class StftDeconv(nn.Module):
    """pytorch/pytorch#171673 (`torch.export.export(..., dynamic_shapes=..., strict=False)` crashes
    with `AssertionError` in `symbolic_shapes.prettify_results` (`assert op == "=="`), triggered by
    `torch.stft` + dynamic time dim): the report's module, `torch.stft` (n_fft 512, hop 160, win 320)
    then `view_as_real` and a `ConvTranspose2d(2, 3, 3, padding=1)` over the (real, imag) channels,
    with the time axis dynamic. The report's exact `Dim` is not visible to me; here it is
    `Dim("time", min=160)`, the range export itself suggests for a plain `Dim("time")`.

    2.14.1: no AssertionError, but `UserError: Constraints violated (time)! ... Not all values of
    time = L['x'].size()[1] in the specified range 160 <= time satisfy the generated guard (2 % (2 +
    2*(L['x'].size()[1] // 160))) != 0`. That guard holds for every time >= 160 (the divisor is at
    least 4), so nothing forces a narrower range: the solver cannot prove it. With `Dim.AUTO` the
    same module exports with range [160, inf) and equals eager at 160, 400 and 32000 samples. No
    catalog entry covers a guard that holds but cannot be proved: unclassified."""

    def __init__(self):
        super().__init__()
        self.win = torch.hann_window(320)
        self.deconv = nn.ConvTranspose2d(2, 3, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        y = torch.stft(
            x,
            n_fft=512,
            hop_length=160,
            win_length=320,
            window=self.win,
            return_complex=True,
            pad_mode="constant",
        )
        y = torch.view_as_real(y)  # (B, F, T, 2)
        y = y.permute(0, 3, 1, 2)  # (B, 2, F, T)
        return self.deconv(y)


class PackedLstm(nn.Module):
    """pytorch/pytorch#171978 (`torch.export` fails on models using `pack_padded_sequence` with
    LSTM due to FakeTensor in dimension): variable-length sequences packed with
    `pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)`, run through an
    `nn.LSTM` and unpacked with `pad_packed_sequence`.

    2.14.1: eager runs; `torch.export.export` (non-strict) raises `TypeError: zeros(): argument
    'size' failed to unpack the object at pos 2 with error "type must be tuple of ints,but got
    FakeTensor"`: the LSTM sizes its initial state with `batch_sizes[0]`, a tensor computed from the
    lengths, where a Python int is needed. (Strict export stops earlier: Dynamo skips
    `pack_padded_sequence`.)"""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(10, 20, batch_first=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        output, _ = self.rnn(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
        return output


def _lengths_to_padding_mask(lengths: torch.Tensor) -> torch.Tensor:
    """torchaudio's Conformer helper, as the report's model runs it."""
    batch_size = lengths.shape[0]
    max_length = int(torch.max(lengths).item())
    return torch.arange(max_length, device=lengths.device, dtype=lengths.dtype).expand(
        batch_size, max_length
    ) >= lengths.unsqueeze(1)


class ConformerSelfAttention(nn.Module):
    """pytorch/pytorch#141551 (Conformer model export flow don't work): torchaudio's `Conformer`
    builds its padding mask from `lengths` (`int(torch.max(lengths).item())`, then `arange(max) >=
    lengths`) and passes it as `key_padding_mask` to each layer's `nn.MultiheadAttention`; exported
    with the default (then strict) export, it failed with `UserError: Could not guard on
    data-dependent expression Eq(u0, 345)`. Reduced to the mask and one self-attention layer.

    2.14.1: strict export passes and the program equals eager, also for other lengths with the same
    maximum. Kept with expected=None. (Non-strict export still fails, on `int()` of the `.item()`.)"""

    def __init__(self):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(16, 4, dropout=0.0)

    def forward(self, input, lengths):
        encoder_padding_mask = _lengths_to_padding_mask(lengths)
        x = input.transpose(0, 1)
        x, _ = self.self_attn(x, x, x, key_padding_mask=encoder_padding_mask, need_weights=False)
        return x.transpose(0, 1), lengths


# ------------------------------------------------------------------ Python data structures
class Data(NamedTuple):
    """The report's input and output container."""

    x: torch.Tensor


class NamedTupleClassifier(nn.Module):
    """pytorch/pytorch#135707 (Documentation for `dynamic_shapes` argument of `export` is unclear
    about namedtuples): a model that takes and returns a `NamedTuple`; the docs say tuples are
    "specified by using ... sequences of contained specifications", so the batch of the field is
    given as a plain tuple, `dynamic_shapes={"data": ({0: batch},)}`. (The report also registers
    the class with `_register_namedtuple`; that does not change the case.)

    2.14.1: `UserError: Detected mismatch between the structure of `inputs` and `dynamic_shapes`:
    `inputs['data']` is a <function namedtuple ...>, but `dynamic_shapes['data']` is a <class
    'tuple'>`. A dict keyed by the field name fails the same way; `Data({0: batch})` exports."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, data: Data):
        x = self.fc2(self.relu(self.fc1(data.x)))
        return Data(self.sigmoid(x))


class RaggedBatch(nn.Module):
    """pytorch/pytorch#127153 ([ONNX] pad_sequence() is not exportable, with neither legacy
    onnx.export nor with dynamo_export): NeMo / Riva TTS's `batch_from_ragged`, a flat text tensor
    cut by `torch.tensor_split(text, batch_lengths)` into a list of pieces of varying length, padded
    back with `pad_sequence`; `torch.export.export` (strict, the default then) failed with `Could
    not guard on data-dependent expression u0 < 0` in the slice decomposition.

    2.14.1: strict export passes and the program equals eager, also for other split points. Kept
    with expected=None."""

    def forward(self, text, batch_lengths):
        lens = batch_lengths[1:] - batch_lengths[:-1]
        texts = nn.utils.rnn.pad_sequence(
            torch.tensor_split(text, batch_lengths), batch_first=True, padding_value=-1
        )
        return texts, lens


def _ragged_case() -> dict:
    text = torch.randint(1024, (1024,), dtype=torch.int64)
    return dict(
        model=RaggedBatch(),
        args=(text, torch.tensor([2, 6, 7, 11, 28, 39], dtype=torch.int64)),
        strict=True,
        check_inputs=[(text, torch.tensor([1, 5, 9, 20, 21, 40], dtype=torch.int64))],
    )


def _conformer_case() -> dict:
    return dict(
        model=ConformerSelfAttention().eval(),
        args=(torch.rand(4, 7, 16), torch.tensor([5, 3, 7, 2])),
        strict=True,
        check_inputs=[(torch.rand(4, 7, 16), torch.tensor([7, 1, 4, 6]))],
    )


FRESH2_A = {
    "flex-block-mask-kwarg": Unseen(
        "pytorch/pytorch#165948",
        "unsupported-input-type",
        _block_mask_case,
    ),
    "flex-attention-saved": Unseen(
        "pytorch/pytorch#140849",
        "unclassified",
        lambda: dict(
            model=FlexAttentionBlock().eval().requires_grad_(False),
            args=(torch.ones(2, 128, 64),),
            dynamic_shapes={"x": {0: Dim("batch", min=1, max=32)}},
            check_inputs=[(torch.randn(3, 128, 64),)],
        ),
    ),
    "fake-quantize-after-qat": Unseen(
        "pytorch/pytorch#167063",
        "quantization-observer",
        lambda: dict(model=_qat_head(), args=(torch.randn(2, 4),)),
    ),
    "stft-dynamic-signal-length": Unseen(
        "pytorch/pytorch#135087",
        "not-one-guard",
        lambda: dict(
            model=StftFrontend(),
            args=(torch.randn(2, 1600),),
            dynamic_shapes=[{0: Dim("dim1"), 1: Dim("dim2")}],
        ),
    ),
    "stft-deconv-unprovable-guard": Unseen(
        "pytorch/pytorch#171673",
        "unclassified",
        lambda: dict(
            model=StftDeconv().eval(),
            args=(torch.randn(2, 1600),),
            dynamic_shapes={"x": {1: Dim("time", min=160)}},
        ),
        missed="wrong page: names constraints-violated (message only) for a guard export cannot prove though it holds for every size in the range it suggested itself",
    ),
    "packed-lstm-lengths": Unseen(
        "pytorch/pytorch#171978",
        "data-dependent-value-int",
        lambda: dict(
            model=PackedLstm().eval(),
            args=(torch.randn(3, 5, 10), torch.tensor([5, 3, 2])),
        ),
        missed="no cause named: unclassified, for a size nn.LSTM reads from a tensor computed from the lengths (TypeError: zeros() got FakeTensor)",
    ),
    "conformer-lengths-mask-strict": Unseen(
        "pytorch/pytorch#141551",
        None,
        _conformer_case,
    ),
    "namedtuple-spec-as-tuple": Unseen(
        "pytorch/pytorch#135707",
        "dynamic-shapes-spec-mismatch",
        lambda: dict(
            model=NamedTupleClassifier(),
            args=(Data(torch.randn(4, 10)),),
            dynamic_shapes={"data": ({0: Dim("batch")},)},
        ),
    ),
    "ragged-split-pad-sequence": Unseen(
        "pytorch/pytorch#127153",
        None,
        _ragged_case,
    ),
}
